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
iteration. The defaults the model launches with are marked. 1-2 s a compile on a CPU core (Triton's
cache keeps them).

Then, from the defaults' figures, a prediction (kernel_model.py, stated in docs/kernels.md): for each
launch of a fused decoder step (attention forward and backward, each LSTM cell's forward and backward)
its programs and bytes at B0 16 and 64 and its predicted microseconds on an H100 and an H200, and the
step's milliseconds beside the targets (docs/kernels.md); with --measured (bench.step's per-kernel
timing, JSON), the measured microseconds per kernel beside the predicted ones.

    python -m scripts.bench.kernels                    # sm_90 (H100, H200)
    python -m scripts.bench.kernels --defaults         # only what the model launches
    python -m scripts.bench.kernels --defaults --measured runs/gpu/kernels.json
    python -m scripts.bench.kernels --arch 80          # A100 (the prediction stays Hopper's)
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from model.ops import attention_backward_kernels, attention_kernels, lstm_kernels, lstm_pointwise_kernels
from model.ops.attention_step import CHUNK
from scripts.bench.kernel_launches import StepLaunch, fits, full_sizes, launch_bytes, loops, step_launches
from scripts.bench.kernel_model import Compiled, Costs, Launch, StructureError
from scripts.bench.kernel_report import (
    ROWS,
    MeasuredError,
    Planned,
    measured_table,
    prediction_table,
    read_measured,
    step_lines,
)
from scripts.common import markdown_table

#: The full model's sizes (kernel_launches.full_sizes: Tacotron2Config's defaults, which hparams.yaml's
#: model_presets.full keeps; LJSpeech's longest text, 192 symbols): attention 128, memory 512, location
#: kernel 31, both LSTMs 1024 wide; the attention cell reads [context, hidden] (512 + 1024), the decoder
#: cell [attention hidden, context, hidden] (1024 + 512 + 1024).
SIZES = full_sizes()
FULL = {
    "dim": SIZES.dim,
    "memory": SIZES.memory,
    "kernel": SIZES.kernel,
    "hidden": SIZES.decoder_hidden,
    "text": SIZES.text,
}
#: The decoder cell as the fast loop launches it: three inputs, the dropout mask; the backward adds
#: the hidden state's gradient from the projection (model/fast_steps.py).
LSTM_FORWARD = {"NPARTS": 3, "HAS_KEEP": True}
LSTM_BACKWARD = {"HAS_KEEP": True, "HAS_EXTRA": True}
#: The attention backward as the fast loop launches it: memory's gradient summed after the loop,
#: the processed memory's and the scoring partials' added in place, the context's gradient from the
#: projection added in (the weights' too where a loss reads the alignments) (model/fast_steps.py)
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
    kernel: (
        str  # the kernel's name, as the table prints it: "what, precision[, more]" (the prediction reads the precision)
    )
    fn: object  # the @triton.jit function
    pointers: dict  # argument name -> Triton element type of that pointer ("fp32" for the rest)
    constexprs: dict
    num_warps: int
    default: bool
    #: arguments a launch at the full model's sizes finds divisible by 16 (16-byte aligned pointers,
    #: sizes and strides), which Triton's launcher specializes on: its loads vectorize (bf16 needs it
    #: for cp.async: a 2-byte load cannot be one)
    aligned: tuple = ()


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
    """The attention kernels, float32 with their products as three TF32 products ("tf32x3",
    matmul_precision=highest) and as one ("tf32", high), and with autocast's bf16 query layer (weight,
    precomputed term, row), memory and processed memory (float32 arithmetic: products as tf32x3); the
    forward's context launch as context_variants compiles it."""
    found = []
    bf16 = {name: "bf16" for name in ("wq_ptr", "preq_ptr", "row_ptr", "dq_ptr", "mem_ptr", "pm_ptr")}
    kernels = (
        ("attention energies", attention_kernels.attention_energies_kernel, {}),
        ("attention backward", attention_backward_kernels.attention_backward_kernel, LOOP_BACKWARD),
    )
    for precision, low, mma in (("tf32x3", {}, "tf32x3"), ("tf32", {}, "tf32"), ("bf16", bf16, "tf32x3")):
        for chunk in chunks:
            blocks = attention_kernels.blocks(FULL["text"], FULL["memory"], FULL["dim"], FULL["kernel"], chunk)
            for num_warps in warps:
                default = chunk == CHUNK and num_warps == attention_kernels.NUM_WARPS
                for name, fn, more in kernels:
                    consts = {**blocks, "ACC": tl.float32, "PRECISION": mma, **more}
                    used = {key: value for key, value in consts.items() if key in fn.arg_names}
                    found.append(Variant(f"{name}, {precision}, chunk {chunk}", fn, low, used, num_warps, default))
        if precision != "tf32":  # no product: the same kernel as tf32x3's
            found += context_variants("bf16" if low else "fp32", low, warps)
    return found


def context_variants(precision: str, pointers: dict, warps: list[int]) -> list[Variant]:
    """The forward's context launch (no product, no chunk) at its column slices of B0 16 and 64
    (attention_kernels.context_columns), whose memory tiles it is compiled for."""
    found = []
    for rows in ROWS:
        columns = attention_kernels.context_columns(rows, FULL["memory"])
        tile = attention_kernels.memory_tile_rows(FULL["text"], columns)
        consts = {"BT": triton.next_power_of_2(FULL["text"]), "BTM": tile, "BMC": columns, "ACC": tl.float32}
        for num_warps in warps:
            default = num_warps == attention_kernels.NUM_WARPS
            label = f"attention context, {precision}, B0 {rows}"
            found.append(
                Variant(label, attention_kernels.attention_context_kernel, pointers, consts, num_warps, default)
            )
    return found


def lstm_variants(warps: list[int] | None) -> list[Variant]:
    """The LSTM kernels for the decoder cell (three inputs) at their launch's warps and each of `warps`
    (None: only the launch's): float32 weights with their products as three TF32 products ("tf32x3",
    matmul_precision=highest) and as one ("tf32", high), and bf16 weights (autocast's). The backward's
    gates' kernel has no product: float32 and bf16 only."""
    found = []
    bf16 = {"w_ptr": "bf16", "row_ptr": "bf16", "dgates_ptr": "bf16"}
    gates = {"BLOCK": lstm_pointwise_kernels.BLOCK, **LSTM_BACKWARD, "ACC": tl.float32}
    for precision, low, mma in (("tf32x3", {}, "tf32x3"), ("tf32", {}, "tf32"), ("bf16", bf16, "tf32x3")):
        products = {"ACC": tl.float32, "PRECISION": mma}
        kernels = [
            ("forward", lstm_kernels.lstm_forward_kernel, {**lstm_kernels.FORWARD_BLOCKS, **LSTM_FORWARD, **products}),
            ("backward gates", lstm_pointwise_kernels.lstm_pointwise_backward_kernel, gates),
            ("backward inputs", lstm_kernels.lstm_backward_inputs_kernel, {**lstm_kernels.INPUTS_BLOCKS, **products}),
        ]
        for name, fn, consts in kernels:
            if name == "backward gates" and precision == "tf32":
                continue  # no product: the same kernel as tf32x3's
            launched = lstm_kernels.INPUTS_WARPS if name == "backward inputs" else lstm_kernels.NUM_WARPS
            label = f"lstm {name}, {'fp32' if name == 'backward gates' and precision != 'bf16' else precision}"
            aligned = tuple(a for a in fn.arg_names if a not in consts and a != "B")  # B0 rows: any
            for num_warps in [launched] if warps is None else sorted({launched, *warps}):
                found.append(Variant(label, fn, low, consts, num_warps, num_warps == launched, aligned))
    return found


def default_variants() -> list[Variant]:
    """What the model launches: each kernel at its module's chunk and warps, fp32 and bf16."""
    attention = attention_variants([CHUNK], [attention_kernels.NUM_WARPS])
    return attention + lstm_variants(None)


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
        attrs={(variant.fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in variant.aligned},
    )
    kernel = triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": variant.num_warps})
    cubin = kernel.asm["cubin"]
    return {**resources(cubin), "SHARED": kernel.metadata.shared, **sass_figures(cuobjdump(cubin, "-sass"))}


def launch_programs(step: StepLaunch, rows: int) -> int:
    """A launch's programs from its kernel module's grid function (the one home of the grids)."""
    if step.kernel == "lstm_forward_kernel":
        grid = lstm_kernels.forward_grid(rows, step.hidden)
    elif step.kernel == "lstm_backward_kernel":
        grid = lstm_kernels.backward_grid(rows, step.width)
    else:
        grid = attention_kernels.grid(rows)
    return math.prod(grid)


def kernel_stages(kernel: str) -> int:
    """The iterations in flight of a kernel's pipelined loops (its module's STAGES)."""
    return (lstm_kernels if kernel.startswith("lstm") else attention_kernels).STAGES.value


def compiled_figures(variant: Variant, figures: dict) -> Compiled:
    """compile_variant's figures as the prediction reads them."""
    pipelined = figures["LDGSTS"] + figures["UTMALDG"] > 0
    loops_found = tuple(tuple(loop) for loop in figures["loops"])
    return Compiled(variant.num_warps, figures["REG"], figures["SHARED"], pipelined, loops_found)


def plan(compiled: list[tuple[Variant, dict]], rows: list[int]) -> tuple[list[Planned], list[str]]:
    """Each launch of a decoder step in each precision compiled, from its default variant (the one
    compiled for it if several: kernel_launches.fits), at `rows`; and what could not be planned (a
    precision lacking a kernel's default variant), said in words."""
    defaults = {}
    for v, r in compiled:
        if v.default:
            defaults.setdefault((v.fn.__name__, v.kernel.split(", ")[1]), []).append((v, r))
    planned, missing = [], []
    for precision in dict.fromkeys(p for _, p in defaults):
        mine = []
        for step in step_launches(SIZES):
            if (step.kernel, precision) not in defaults:
                missing.append(f"no prediction in {precision}: no default variant of {step.kernel} compiled")
                break
            candidates = defaults[step.kernel, precision]
            v, figures = next(((v, r) for v, r in candidates if fits(step, v.constexprs)), candidates[0])
            inner, outside = loops(step, SIZES, v.constexprs)
            launches = {
                r: Launch(
                    launch_programs(step, r),
                    launch_bytes(step, SIZES, r, v.constexprs, v.pointers),
                    inner,
                    outside,
                    kernel_stages(step.kernel),
                )
                for r in rows
            }
            mine.append(Planned(step, precision, compiled_figures(v, figures), launches))
        else:
            planned += mine
    return planned, missing


def compile_table(compiled: list[tuple[Variant, dict]], arch: int) -> list[str]:
    """The compiler's figures, one row per variant (COLUMNS)."""
    rows = []
    for v, r in compiled:
        mark = " (default)" if v.default else ""
        figures = [v.num_warps, r["REG"], r["STACK"], r["SHARED"], r["LDGSTS"], r["UTMALDG"]]
        loops_found = ", ".join(f"{n} ({plain} LDG)" for n, plain in r["loops"])
        rows.append([v.kernel + mark, *(str(x) for x in figures), loops_found])
    return [f"Triton {triton.__version__}, sm_{arch}, the full model's sizes {FULL}", *markdown_table(COLUMNS, rows)]


def report(args: argparse.Namespace) -> list[str]:
    """The report's lines: the compiled variants' table, then the prediction (and the measured figures)."""
    measured = None if args.measured is None else read_measured(args.measured)  # before minutes of compiling
    if args.defaults:
        variants = default_variants()
    else:
        warps = [int(w) for w in args.warps.split(",")]
        variants = attention_variants([int(c) for c in args.chunks.split(",")], warps) + lstm_variants(warps)
    compiled = [(v, compile_variant(v, args.arch)) for v in variants]
    costs = Costs(latency_s=args.latency_ns * 1e-9, launch_s=args.launch_us * 1e-6)
    rows = sorted({*ROWS, *(() if measured is None else (measured.b0,))})
    planned, missing = plan(compiled, rows)
    lines = [*compile_table(compiled, args.arch), "", *missing]
    if planned:
        head = (
            f"Predicted per launch (docs/kernels.md): round trip {args.latency_ns:g} ns, launch {args.launch_us:g} us"
        )
        lines += [head, *prediction_table(planned, costs), "", *step_lines(planned, SIZES, costs)]
    if measured is not None:
        lines += ["", *measured_table(planned, measured, costs)]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability x 10 (90: H100/H200, 80: A100)")
    parser.add_argument("--chunks", default="16,32,64", help="the attention's chunks of symbols to compile")
    parser.add_argument("--warps", default="4,8", help="warps per program to compile")
    parser.add_argument("--defaults", action="store_true", help="only what the model launches (ignores the two above)")
    parser.add_argument("--measured", help="bench.step's per-kernel timing (JSON), printed beside the prediction")
    parser.add_argument("--latency-ns", type=float, default=Costs().latency_s * 1e9, help="a memory round trip")
    parser.add_argument("--launch-us", type=float, default=Costs().launch_s * 1e6, help="a launch in a CUDA graph")
    args = parser.parse_args(argv)
    try:
        print("\n".join(report(args)))
    except (MeasuredError, StructureError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
