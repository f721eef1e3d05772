"""The fused decoder step's Triton kernels compiled for a GPU on any machine: registers, spills, shared memory,
pipelined loads and the instructions of each loop.

Triton compiles for a named target without a GPU (down to the cubin, with the ptxas it ships), and
the cubin says what each thread of a kernel holds. A kernel that needs more than the 255 registers a
thread has spills the rest to local memory (`STACK` below), which costs memory traffic on every
use: the first thing to avoid before a GPU times anything. For each kernel of model/ops/attention_kernels.py
and model/ops/lstm_kernels.py, at the full model's sizes (LJSpeech's longest text: 192 symbols, so a
256-symbol block), in float32 and with autocast's bf16 inputs, and at each block and warp count
given, it prints one Markdown table row: registers per thread, stack (spilled) bytes and shared
memory; then, read from the SASS (the cuobjdump Triton ships), the loads that the compiler
pipelined, which a loop issues ahead of the iterations that use them: `LDGSTS` (cp.async, global
to shared memory) and `UTMALDG` (TMA); and the instructions of each innermost loop, from its head
to its back branch (what a warp issues per iteration, branches inside taken or not), and the plain
global loads (`LDG`) left in it: a loop whose loads are not pipelined waits a memory round trip per
iteration. The defaults the model launches
with are marked. 1-2 s a compile on a CPU core (Triton's cache keeps them).

    python -m scripts.bench.kernels                    # sm_90 (H100, H200)
    python -m scripts.bench.kernels --defaults         # only what the model launches
    python -m scripts.bench.kernels --arch 80          # A100
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from model.ops import attention_kernels, lstm_kernels
from model.ops.attention_step import CHUNK
from scripts.common import markdown_table

#: The full model (hparams.yaml's model_presets.full): attention 128, memory 512, location kernel 31,
#: both LSTMs 1024 wide; the attention cell reads [context, hidden] (512 + 1024), the decoder cell
#: [attention hidden, context, hidden] (1024 + 512 + 1024). LJSpeech's longest text, 192 symbols.
FULL = {"dim": 128, "memory": 512, "kernel": 31, "hidden": 1024, "text": 192}
#: The attention backward as the fast loop launches it: memory's gradient summed after the loop,
#: the processed memory's and the scoring partials' added in place, the context's gradient from the
#: projection added in (the weights' too where a loss reads the alignments) (model/fast_steps.py);
#: the decoder cell's backward adds its hidden state's gradient from the projection
LOOP_BACKWARD = {"MEMORY_GRAD": False, "PM_ACC": True, "PART_ACC": True, "CTX_EXTRA": True, "W_EXTRA": False}


#: The table's columns (tests/test_scripts_kernels.py reads them by name).
COLUMNS = [
    "kernel",
    "warps",
    "registers",
    "stack bytes (spills)",
    "shared bytes",
    "LDGSTS",
    "UTMALDG",
    "instructions per iteration of each innermost loop (plain loads in it)",
]


@dataclass(frozen=True)
class Variant:
    kernel: str  # the kernel's name, as the table prints it
    fn: object  # the @triton.jit function
    pointers: dict  # argument name -> Triton element type of that pointer ("fp32" for the rest)
    constexprs: dict
    num_warps: int
    default: bool


def signature(fn, pointers: dict, constexprs: dict) -> dict:
    """Each argument: constexpr, a pointer (named *_ptr) of its element type, or a 32-bit integer."""
    sig = {}
    for name in fn.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name.endswith("_ptr"):
            sig[name] = "*" + pointers.get(name, "fp32")
        else:
            sig[name] = "i32"
    return sig


def attention_variants(chunks: list[int], warps: list[int]) -> list[Variant]:
    """Both attention kernels, fp32 and with autocast's bf16 query layer (weight, precomputed term, row),
    memory and processed memory."""
    found = []
    bf16 = {name: "bf16" for name in ("wq_ptr", "preq_ptr", "row_ptr", "dq_ptr", "mem_ptr", "pm_ptr")}
    for precision, low in (("fp32", {}), ("bf16", bf16)):
        for chunk in chunks:
            blocks = attention_kernels.blocks(FULL["text"], FULL["memory"], FULL["dim"], FULL["kernel"], chunk)
            for num_warps in warps:
                default = chunk == CHUNK and num_warps == attention_kernels.NUM_WARPS
                consts = {**blocks, "ACC": tl.float32}
                kernels = (
                    ("attention forward", attention_kernels.attention_forward_kernel, {}),
                    ("attention backward", attention_kernels.attention_backward_kernel, LOOP_BACKWARD),
                )
                for name, fn, more in kernels:
                    label = f"{name}, {precision}, chunk {chunk}"
                    found.append(Variant(label, fn, low, {**consts, **more}, num_warps, default))
    return found


def lstm_variants(warps: list[int]) -> list[Variant]:
    """Both LSTM kernels for the decoder cell (three inputs), fp32 and with bf16 weights (autocast's)."""
    found = []
    for precision, low in (("fp32", {}), ("bf16", {"w_ptr": "bf16", "row_ptr": "bf16"})):
        for num_warps in warps:
            default = num_warps == lstm_kernels.NUM_WARPS
            forward = {**lstm_kernels.FORWARD_BLOCKS, "NPARTS": 3, "HAS_KEEP": True, "ACC": tl.float32}
            backward = {**lstm_kernels.BLOCKS, "HAS_KEEP": True, "HAS_EXTRA": True, "ACC": tl.float32}
            found.append(
                Variant(
                    f"lstm forward, {precision}", lstm_kernels.lstm_forward_kernel, low, forward, num_warps, default
                )
            )
            found.append(
                Variant(
                    f"lstm backward, {precision}", lstm_kernels.lstm_backward_kernel, low, backward, num_warps, default
                )
            )
    return found


def default_variants() -> list[Variant]:
    """What the model launches: each kernel at its module's chunk and warps, fp32 and bf16."""
    attention = attention_variants([CHUNK], [attention_kernels.NUM_WARPS])
    return attention + lstm_variants([lstm_kernels.NUM_WARPS])


def cuobjdump(cubin: bytes, flag: str) -> str:
    """What the cuobjdump Triton ships prints for the cubin with `flag`."""
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, flag, f.name], capture_output=True, text=True, check=True).stdout


def resources(cubin: bytes) -> dict:
    """REG, STACK, SHARED and LOCAL of the cubin's kernel, as cuobjdump reads them."""
    out = cuobjdump(cubin, "--dump-resource-usage")
    return {key: int(value) for key, value in re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", out)}


#: One instruction of `cuobjdump -sass`: its address and its text (predicate, opcode, operands).
SASS_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+([^;]*?)\s*;")
#: A branch and its target address.
BRANCH = re.compile(r"\bBRA(?:\.\w+)* (0x[0-9a-f]+)")


def sass_figures(sass: str) -> dict:
    """From a kernel's SASS: its pipelined loads, LDGSTS (cp.async) and UTMALDG (TMA), and for each
    innermost loop (a back branch's target up to the branch), in code order, its instructions and its
    plain global loads (LDG: each waits its round trip in the iteration that issues it)."""
    instructions = [(int(at, 16), text) for at, text in SASS_INSTRUCTION.findall(sass)]
    loops = []
    for at, text in instructions:
        branch = BRANCH.search(text)
        if branch and int(branch.group(1), 16) < at:
            loops.append((int(branch.group(1), 16), at))
    innermost = [(a, b) for a, b in loops if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)]
    return {
        "LDGSTS": sum(1 for _, text in instructions if re.search(r"\bLDGSTS\b", text)),
        "UTMALDG": sum(1 for _, text in instructions if re.search(r"\bUTMALDG\b", text)),
        "loops": [
            (
                sum(1 for at, _ in instructions if a <= at <= b),
                sum(1 for at, text in instructions if a <= at <= b and re.search(r"\bLDG\b", text)),
            )
            for a, b in sorted(innermost)
        ],
    }


def compile_variant(variant: Variant, arch: int) -> dict:
    """Compile for sm_`arch` (no GPU needed; Triton's cache keeps the result): its resources and
    its SASS's figures (sass_figures)."""
    source = ASTSource(
        fn=variant.fn,
        signature=signature(variant.fn, variant.pointers, variant.constexprs),
        constexprs=variant.constexprs,
    )
    kernel = triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": variant.num_warps})
    cubin = kernel.asm["cubin"]
    return {**resources(cubin), "SHARED": kernel.metadata.shared, **sass_figures(cuobjdump(cubin, "-sass"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability x 10 (90: H100/H200, 80: A100)")
    parser.add_argument("--chunks", default="16,32,64", help="the attention's chunks of symbols to compile")
    parser.add_argument("--warps", default="4,8", help="warps per program to compile")
    parser.add_argument("--defaults", action="store_true", help="only what the model launches (ignores the two above)")
    args = parser.parse_args(argv)
    if args.defaults:
        variants = default_variants()
    else:
        warps = [int(w) for w in args.warps.split(",")]
        variants = attention_variants([int(c) for c in args.chunks.split(",")], warps) + lstm_variants(warps)
    rows = []
    for v in variants:
        r = compile_variant(v, args.arch)
        mark = " (default)" if v.default else ""
        figures = [v.num_warps, r["REG"], r["STACK"], r["SHARED"], r["LDGSTS"], r["UTMALDG"]]
        loops = ", ".join(f"{n} ({plain} LDG)" for n, plain in r["loops"])
        rows.append([v.kernel + mark, *(str(x) for x in figures), loops])
    print(f"Triton {triton.__version__}, sm_{args.arch}, the full model's sizes {FULL}")
    print("\n".join(markdown_table(COLUMNS, rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
