"""The prediction's plan: each Triton launch of a decoder step, in either design and each precision
group, from the compiled default variant that runs it (scripts/bench/kernels.py compiles them):
its programs from the kernel modules' grid functions, its bytes and loops (kernel_launches.py).

Why apart. The attention's part (attention_programs) and the groups' rule (group_candidates,
precision_notes) change with the kernels; the compiling and the printing do not.
"""

from __future__ import annotations

import inspect
import math
import sys

from model.ops import attention_kernels, lstm_kernels, lstm_pointwise_kernels
from scripts.bench.kernel_launches import DESIGNS, StepLaunch, fits, launch_bytes, loops, step_launches
from scripts.bench.kernel_model import GROUPS, Compiled, Launch
from scripts.bench.kernel_report import Planned
from scripts.bench.kernel_variants import KERNEL_MODULES, SIZES, Variant


def launch_programs(step: StepLaunch, rows: int) -> int:
    """A launch's programs from its kernel module's grid function (the one home of the grids)."""
    if step.kernel == "lstm_forward_kernel":
        grid = lstm_kernels.forward_grid(rows, step.hidden)
    elif step.kernel == "lstm_backward_inputs_kernel":
        grid = lstm_kernels.backward_grid(rows, step.width)
    elif step.kernel.startswith("lstm_pointwise"):
        grid = lstm_pointwise_kernels.grid(rows, step.hidden)
    else:
        grid = attention_programs(step, rows)
    return math.prod(grid)


def attention_programs(step: StepLaunch, rows: int) -> tuple[int, ...]:
    """The attention kernels' grid (attention_kernels.grid)."""
    return attention_kernels.grid(rows)


def kernel_stages(fn) -> int:
    """The iterations in flight of a kernel's pipelined loops (its module's STAGES; 1 for a module
    without loops to pipeline, whose kernels' round trips do not depend on it)."""
    stages = getattr(kernel_module(fn), "STAGES", None)
    return 1 if stages is None else stages.value


def kernel_module(fn):
    """The module of a @triton.jit function (compiled or, under TRITON_INTERPRET=1, interpreted)."""
    return sys.modules[fn.fn.__module__]


def module_stages(fn) -> dict:
    """The kernel's module's stage counts by name (STAGES, CHAIN_STAGES: the loops' iterations in flight)."""
    module = kernel_module(fn)
    return {name: getattr(module, name).value for name in dir(module) if name.endswith("STAGES")}


def compiled_figures(variant: Variant, figures: dict) -> Compiled:
    """compile_variant's figures as the prediction reads them."""
    pipelined = figures["LDGSTS"] + figures["UTMALDG"] > 0
    loops_found = tuple(tuple(loop) for loop in figures["loops"])
    return Compiled(variant.num_warps, figures["REG"], figures["SHARED"], pipelined, loops_found)


def default_variants_by_kernel(compiled: list[tuple[Variant, dict]]) -> dict:
    """The default variants and their figures, by (Triton function name, precision compiled)."""
    defaults = {}
    for v, r in compiled:
        if v.default:
            defaults.setdefault((v.fn.__name__, v.kernel.split(", ")[1]), []).append((v, r))
    return defaults


def group_candidates(defaults: dict, kernel: str, group: str) -> tuple[str, list] | None:
    """The variants a launch runs in a precision group: its own in that precision, else (a float32
    group, a kernel compiled in "fp32" only) the fp32 ones; None if neither was compiled."""
    for precision in (group,) if group == "bf16" else (group, "fp32"):
        if (kernel, precision) in defaults:
            return precision, defaults[kernel, precision]
    return None


def planned_launch(step: StepLaunch, group: str, found: tuple[str, list], designs: tuple, rows: list[int]) -> Planned:
    """One launch from its compiled variant (the one compiled for it if several: kernel_launches.fits)."""
    precision, candidates = found
    v, figures = next(((v, r) for v, r in candidates if fits(step, v.constexprs)), candidates[0])
    inner, outside = loops(step, SIZES, {**v.constexprs, **module_stages(v.fn)})
    stages = kernel_stages(v.fn)
    launches = {
        r: Launch(
            launch_programs(step, r), launch_bytes(step, SIZES, r, v.constexprs, v.pointers), inner, outside, stages
        )
        for r in rows
    }
    return Planned(step, group, precision, designs, compiled_figures(v, figures), launches)


def plan(compiled: list[tuple[Variant, dict]], rows: list[int]) -> tuple[list[Planned], list[str]]:
    """Each Triton launch of a decoder step in either design (the designs that launch it named) in
    each precision group (kernel_model.GROUPS) from its default variant, at `rows`; and what could not
    be planned (a group lacking a kernel's default variant), said in words."""
    defaults = default_variants_by_kernel(compiled)
    designs = {}
    for design in DESIGNS:
        for step in step_launches(SIZES, design):
            designs.setdefault(step, []).append(design)
    planned, missing = [], []
    for group in GROUPS:
        absent = [step.kernel for step in designs if group_candidates(defaults, step.kernel, group) is None]
        if absent:
            missing.append(
                f"no prediction in {group}: no default variant of {', '.join(dict.fromkeys(absent))} compiled"
            )
            continue
        for step, used in designs.items():
            found = group_candidates(defaults, step.kernel, group)
            planned.append(planned_launch(step, group, found, tuple(used), rows))
    return planned, missing


def precision_notes(planned: list[Planned]) -> list[str]:
    """A note per group for each kernel run in another precision than the group's: a kernel with
    products but no PRECISION constexpr runs them as kernel_math.mma's default, three TF32 products."""
    notes = []
    for group in dict.fromkeys(p.group for p in planned):
        borrowed = {p.step.kernel: p for p in planned if p.group == group and p.compiled_as != p.group}
        products = [name for name in borrowed if has_products(name)]
        if products and group != "tf32x3":
            notes.append(
                f"Note: in {group} the rows of {', '.join(products)} are their fp32 variants: their products run"
                " as three TF32 products (tf32x3) in every float32 group, as the kernels take no PRECISION constexpr"
                " yet."
            )
    return notes


def has_products(kernel: str) -> bool:
    """Whether a kernel's module multiplies on the tensor cores (calls kernel_math.mma)."""
    module = next(m for m in KERNEL_MODULES if hasattr(m, kernel))
    return "mma(" in inspect.getsource(module)
