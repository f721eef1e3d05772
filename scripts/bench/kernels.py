"""The decoder step's Triton kernels compiled for a GPU on any machine: registers, spills, shared memory,
pipelined loads and the instructions of each loop; and a prediction of the step's time from them.

Triton compiles for a named target without a GPU (down to the cubin, with the ptxas it ships), and
the cubin says what each thread of a kernel holds. A kernel that needs more than the 255 registers a
thread has spills the rest to local memory (`STACK` below), which costs memory traffic on every
use: the first thing to avoid before a GPU times anything. For each kernel of model/ops/attention_kernels.py,
model/ops/attention_backward_kernels.py, model/ops/lstm_kernels.py and model/ops/lstm_pointwise_kernels.py
(the attention's context and filter backward at B0 16 and 64: their shares of a row follow the rows),
at the full model's sizes
(LJSpeech's longest text: 192 symbols, so a 256-symbol block), in each precision it runs in (a kernel
with a PRECISION constexpr: float32 products as three TF32 products, "tf32x3", or one, "tf32"; else
"fp32"; and bf16 inputs as autocast gives them) and at each block and warp count given, it prints one
Markdown table row: registers per thread, stack (spilled) bytes and shared memory; then, read from the
SASS (the cuobjdump Triton ships), the loads that the compiler pipelined, which a loop issues ahead of
the iterations that use them: `LDGSTS` (cp.async, global to shared memory) and `UTMALDG` (TMA); and the
instructions of each innermost loop, from its head to its back branch (what a warp issues per
iteration, branches inside taken or not), and the plain global loads (`LDG`) left in it: a loop whose
loads are not pipelined waits a memory round trip per iteration. The defaults the model launches with
are marked. 1-2 s a compile on a CPU core (Triton's cache keeps them).

Then, from the defaults' figures, a prediction (kernel_model.py, stated in docs/kernels.md) in each
precision group (kernel_model.GROUPS: tf32x3, tf32, bf16) for both designs of the step's LSTM cells,
fused (model.fused_lstm) and split (model.split_lstm, its products on cuBLAS): for each Triton launch
its programs and bytes at B0 16 and 64 and its predicted microseconds on an H100 and an H200; the
launches without a compiled kernel (cuBLAS's GEMMs, PyTorch's copies, casts and additions:
kernel_operations.py) from their bytes and operations; and the step's milliseconds, fused vs split,
beside the targets (docs/kernels.md); with --measured (bench.step's per-kernel timing, JSON), the
measured microseconds per kernel beside the predicted ones.

    python -m scripts.bench.kernels                    # sm_90 (H100, H200)
    python -m scripts.bench.kernels --defaults         # only what the model launches
    python -m scripts.bench.kernels --defaults --measured runs/gpu/kernels.json
    python -m scripts.bench.kernels --arch 80          # A100 (the prediction stays Hopper's)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from scripts.bench.kernel_model import Costs, StructureError
from scripts.bench.kernel_plan import plan, precision_notes
from scripts.bench.kernel_report import (
    ROWS,
    MeasuredError,
    measured_table,
    operation_table,
    prediction_table,
    read_measured,
    step_lines,
)
from scripts.bench.kernel_variants import FULL, SIZES, Variant, attention_variants, default_variants, lstm_variants
from scripts.common import markdown_table

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
        groups = list(dict.fromkeys(p.group for p in planned))
        head = (
            f"Predicted per Triton launch (docs/kernels.md): round trip {args.latency_ns:g} ns,"
            f" launch {args.launch_us:g} us"
        )
        lines += [head, *prediction_table(planned, costs), *precision_notes(planned), ""]
        lines += ["Predicted per launch without a compiled kernel (cuBLAS's and PyTorch's: a floor)"]
        lines += [*operation_table(SIZES, groups, costs), "", *step_lines(planned, SIZES, costs)]
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
