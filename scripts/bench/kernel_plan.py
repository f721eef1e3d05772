"""The prediction's plan: each Triton launch of a decoder step, in either design and each precision
group, from the compiled default variant that runs it (scripts/bench/kernels.py compiles them):
its programs from the kernel modules' grid functions, its bytes and loops (kernel_launches.py).

Why apart. The attention's part (attention_programs) and the groups' rule (group_candidates,
precision_notes) change with the kernels; the compiling and the printing do not.
"""

from __future__ import annotations

import inspect
import math
import re
import sys
import types

from model.ops import attention_kernels, lstm_kernels, lstm_pointwise_kernels
from scripts.bench.kernel_launches import DESIGNS, StepLaunch, fits, launch_bytes, loops, step_launches
from scripts.bench.kernel_model import GROUPS, Compiled, Launch
from scripts.bench.kernel_report import Planned
from scripts.bench.kernel_variants import KERNEL_MODULES, SIZES, Variant, row_shares


def launch_programs(step: StepLaunch, rows: int, shares: dict) -> int:
    """A launch's programs from its kernel module's grid function (the one home of the grids), at the
    launch's shares of a row (kernel_variants.row_shares) for the attention's."""
    if step.kernel == "lstm_forward_kernel":
        grid = lstm_kernels.forward_grid(rows, step.hidden)
    elif step.kernel == "lstm_backward_inputs_kernel":
        grid = lstm_kernels.backward_grid(rows, step.width)
    elif step.kernel.startswith("lstm_pointwise"):
        grid = lstm_pointwise_kernels.grid(rows, step.hidden)
    else:
        grid = attention_programs(step, rows, shares)
    return math.prod(grid)


def attention_programs(step: StepLaunch, rows: int, shares: dict) -> tuple[int, int]:
    """The attention kernels' grids: the context's (row, column slice), the others' (row, text slice)."""
    if step.kernel == "attention_context_kernel":
        return attention_kernels.context_grid(rows, SIZES.memory, shares["BMC"])
    return attention_kernels.text_grid(rows, SIZES.text, shares["SLICE"])


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
    """One launch at each of `rows` from its compiled variant (the one compiled for it at those rows
    if several: kernel_launches.fits), its loops and bytes at the rows' shares (row_shares)."""
    precision, candidates = found
    compiled, launches = {}, {}
    for r in rows:
        shares = row_shares(candidates[0][0].fn, r)
        v, figures = next(((v, f) for v, f in candidates if fits(step, v.constexprs, shares)), candidates[0])
        consts = {**v.constexprs, **module_stages(v.fn), **shares}
        inner, outside = loops(step, SIZES, consts)
        moved = launch_bytes(step, SIZES, r, consts, v.pointers)
        launches[r] = Launch(launch_programs(step, r, shares), moved, inner, outside, kernel_stages(v.fn))
        compiled[r] = compiled_figures(v, figures)
    return Planned(step, group, precision, designs, compiled, launches)


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
    """Whether a kernel multiplies on the tensor cores: calls kernel_math.mma, itself or through the
    @triton.jit helpers of its module that it calls (a module's other kernels may multiply where it
    does not: the attention's context)."""
    module = next(m for m in KERNEL_MODULES if hasattr(m, kernel))
    return calls_mma(getattr(module, kernel), module)


def calls_mma(fn, module) -> bool:
    """Whether `fn`'s source calls mma, or calls a @triton.jit function of `module` that does (compiled
    or, under TRITON_INTERPRET=1, interpreted: either wraps its Python function as `fn`)."""
    source = inspect.getsource(fn.fn)
    if "mma(" in source:
        return True
    called = {getattr(module, name, None) for name in re.findall(r"\b(\w+)\(", source)}
    return any(
        isinstance(getattr(f, "fn", None), types.FunctionType) and f is not fn and calls_mma(f, module) for f in called
    )
