"""The compiler's report's prediction, printed: per launch of a decoder step its programs, bytes and
predicted time on an H100 and an H200 at B0 16 and 64 (kernel_model.py; the launches without a
compiled kernel: kernel_operations.py), in each precision group; the step's total in both designs,
fused and split, beside the targets and the step measured before the kernels; and, given bench.step's
per-kernel timing (`--measured`), the measured microseconds beside the prediction. Torch- and
Triton-free: scripts/bench/kernels.py compiles and plans the launches."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from scripts.bench.kernel_launches import DESIGNS, Sizes, StepLaunch
from scripts.bench.kernel_model import GPUS, Compiled, Costs, Gpu, Launch, Prediction, predict
from scripts.bench.kernel_operations import Operation, predict_operation, step_operations
from scripts.common import markdown_table

#: The rows of a batch the prediction is made at: B0 16 (the paper's) and 64.
ROWS = (16, 64)
#: The fused step's targets per decoder step at B0 16: the prediction (from the compiler's output) and the
#: step measured on one H100 or H200.
PREDICTION_TARGET_S = 0.15e-3
MEASURED_TARGET_S = 0.10e-3
#: The graphed fast step before the fused kernels, measured on an H100 in float32 (docs/results.md's
#: step-cost fit): 0.2856 ms a decoder step plus 7.06 us an utterance-step.
BEFORE_FIXED_S = 0.2856e-3
BEFORE_PER_ROW_S = 7.06e-6

PREDICTION_COLUMNS = [
    "launch",
    "precision",
    "design",
    *(f"programs, B0 {r}" for r in ROWS),
    *(f"MB, B0 {r}" for r in ROWS),
    *(f"us {gpu.name}, B0 {r}" for gpu in GPUS for r in ROWS),
    f"bound ({GPUS[0].name}, B0 {ROWS[0]})",
]
OPERATION_COLUMNS = [
    "operation",
    "precision",
    "design",
    "launches",
    *(f"MB, B0 {r}" for r in ROWS),
    *(f"us {gpu.name}, B0 {r}" for gpu in GPUS for r in ROWS),
    f"bound ({GPUS[0].name}, B0 {ROWS[0]})",
]
MEASURED_COLUMNS = [
    "kernel",
    "calls per step, predicted",
    "calls per step, measured",
    "us per step, predicted",
    "us per step, measured",
    "measured / predicted",
]


class MeasuredError(ValueError):
    """A --measured file that cannot be read as bench.step's per-kernel timing."""


@dataclass(frozen=True)
class Planned:
    """One Triton launch of the step in one precision group (kernel_model.GROUPS): the designs that
    launch it, the compiled variant's precision (`compiled_as`: "fp32" for a kernel without a float32
    precision of its own), and its figures and the launch at each number of rows it is predicted at
    (the attention's context and filter backward are compiled per B0: kernel_variants.SHARE_ROWS)."""

    step: StepLaunch
    group: str
    compiled_as: str
    designs: tuple[str, ...]
    compiled: dict[int, Compiled]  # at each number of rows: a launch's variant may follow them
    launches: dict[int, Launch]

    def predicted(self, rows: int, gpu: Gpu, costs: Costs) -> Prediction:
        return predict(self.launches[rows], self.compiled[rows], gpu, costs, f"{self.step.kernel} ({self.step.label})")

    @property
    def precision(self) -> str:
        """The group, and the compiled variant's precision where it is another."""
        return self.group if self.compiled_as == self.group else f"{self.group}: {self.compiled_as}"


@dataclass(frozen=True)
class Measured:
    """bench.step's per-kernel timing (scripts/bench/kernel_times.py): {"device", "b0", "precision",
    "variant" (optional), "kernels": {Triton function name: {"us_per_decoder_step",
    "calls_per_decoder_step"}}}, and the GPU of the model it is compared with."""

    device: str
    b0: int
    precision: str
    kernels: dict[str, tuple[float, float]]  # name -> (us per decoder step, calls per decoder step)
    gpu: Gpu
    variant: str = ""


def field(data: dict, key: str, kind: type, where: str):
    """data[key], which must be a `kind` (a number for float), else a MeasuredError naming it."""
    value = data.get(key) if isinstance(data, dict) else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else isinstance(value, kind)
    if not ok:
        raise MeasuredError(f"{where}: {key!r} must be a {kind.__name__}, found {value!r}")
    return value


def read_measured(path: str) -> Measured:
    """The per-kernel timing at `path` (format: Measured), checked; its device must be an H100 or H200."""
    where = f"--measured {path}"
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise MeasuredError(f"{where}: cannot read it ({err.strerror})") from err
    except json.JSONDecodeError as err:
        raise MeasuredError(f"{where}: not JSON (line {err.lineno}: {err.msg})") from err
    device, b0 = field(data, "device", str, where), field(data, "b0", int, where)
    precision, kernels = field(data, "precision", str, where), field(data, "kernels", dict, where)
    if b0 < 1:
        raise MeasuredError(f"{where}: 'b0' must be at least 1, found {b0}")
    timed = {}
    for name, entry in kernels.items():
        at = f"{where}, kernel {name!r}"
        timed[name] = (
            field(entry, "us_per_decoder_step", float, at),
            field(entry, "calls_per_decoder_step", float, at),
        )
    gpu = next((g for g in GPUS if g.name in device.upper()), None)
    if gpu is None:
        names = " or ".join(g.name for g in GPUS)
        raise MeasuredError(f"{where}: device {device!r} is not an {names}, the GPUs the prediction has figures for")
    variant = field(data, "variant", str, where) if "variant" in data else ""
    return Measured(device, b0, precision, timed, gpu, variant)


def measured_precision(measured: Measured) -> str:
    """The precision group a measurement is compared with: bf16 under autocast, tf32 where it says
    so (and not tf32x3), else tf32x3 (float32 at matmul_precision=highest)."""
    said = measured.precision.lower()
    if "bf16" in said:
        return "bf16"
    return "tf32" if "tf32" in said and "tf32x3" not in said else "tf32x3"


def measured_design(measured: Measured) -> str:
    """The design a measurement timed: split if its variant says so (bench.step's "graphed+split") or it
    timed the split cell's forward kernel, else fused."""
    split = "split" in measured.variant or "lstm_pointwise_forward_kernel" in measured.kernels
    return "split" if split else "fused"


def step_seconds(
    planned: list[Planned], operations: list[Operation], group: str, rows: int, gpu: Gpu, costs: Costs
) -> float:
    """A decoder step: its Triton launches and its other operations (one design's, in one group)."""
    triton = sum(p.predicted(rows, gpu, costs).seconds for p in planned)
    return triton + sum(predict_operation(op, rows, gpu, costs, group).seconds for op in operations)


def time_cells(seconds: dict[tuple[str, int], float], bound: str) -> list[str]:
    """Microseconds per GPU and rows (the tables' time columns), then the bound named."""
    return [*(f"{1e6 * seconds[gpu.name, r]:.1f}" for gpu in GPUS for r in ROWS), bound]


def prediction_table(planned: list[Planned], costs: Costs) -> list[str]:
    """One row per Triton launch and precision group (PREDICTION_COLUMNS): microseconds per launch."""
    rows = []
    for p in planned:
        seconds = {(gpu.name, r): p.predicted(r, gpu, costs).seconds for gpu in GPUS for r in ROWS}
        rows.append(
            [
                p.step.label,
                p.precision,
                ", ".join(p.designs),
                *(str(p.launches[r].programs) for r in ROWS),
                *(f"{p.launches[r].bytes / 1e6:.2f}" for r in ROWS),
                *time_cells(seconds, p.predicted(ROWS[0], GPUS[0], costs).bound),
            ]
        )
    return markdown_table(PREDICTION_COLUMNS, rows)


def operation_table(sizes: Sizes, groups: list[str], costs: Costs) -> list[str]:
    """One row per cuBLAS GEMM, and one per kind of the other operations (their launches summed), per
    group (OPERATION_COLUMNS): not compiled here (kernel_operations.py)."""
    rows = []
    for group in groups:
        kinds: dict[tuple[str, tuple[str, ...]], list[Operation]] = {}
        for op in step_operations(sizes, group):
            kinds.setdefault((op.label if op.kind == "GEMMs" else op.kind, op.designs), []).append(op)
        for (label, designs), ops in kinds.items():
            seconds = {
                (gpu.name, r): sum(predict_operation(op, r, gpu, costs, group).seconds for op in ops)
                for gpu in GPUS
                for r in ROWS
            }
            first = [predict_operation(op, ROWS[0], GPUS[0], costs, group) for op in ops]
            bound = max(first, key=lambda p: p.seconds).bound
            mb = [f"{sum(op.bytes(r) for op in ops) / 1e6:.2f}" for r in ROWS]
            rows.append([label, group, ", ".join(designs), str(len(ops)), *mb, *time_cells(seconds, bound)])
    return markdown_table(OPERATION_COLUMNS, rows)


def design_parts(
    planned: list[Planned], sizes: Sizes, group: str, design: str
) -> tuple[list[Planned], list[Operation]]:
    """One design's Triton launches and other operations in one group."""
    mine = [p for p in planned if p.group == group and design in p.designs]
    return mine, [op for op in step_operations(sizes, group) if design in op.designs]


def step_lines(planned: list[Planned], sizes: Sizes, costs: Costs) -> list[str]:
    """Per precision group, the predicted milliseconds per decoder step of each design on each GPU at
    ROWS, beside the targets and the step before the kernels."""
    lines = []
    for group in dict.fromkeys(p.group for p in planned):
        designs = [design_parts(planned, sizes, group, d) for d in DESIGNS]
        per_gpu = []
        for gpu in GPUS:
            at = []
            for r in ROWS:
                ms = [f"{1e3 * step_seconds(p, ops, group, r, gpu, costs):.3f}" for p, ops in designs]
                at.append(f"{' vs '.join(ms)} ms at B0 {r}")
            per_gpu.append(f"{gpu.name} " + ", ".join(at))
        lines.append(f"Predicted ms per decoder step, {group}, {' vs '.join(DESIGNS)}: " + "; ".join(per_gpu))
    before = ", ".join(f"{1e3 * (BEFORE_FIXED_S + r * BEFORE_PER_ROW_S):.3f} ms at B0 {r}" for r in ROWS)
    lines.append(
        f"Targets: at most {PREDICTION_TARGET_S * 1e3:.2f} ms predicted and {MEASURED_TARGET_S * 1e3:.2f} ms measured"
        f" at B0 {ROWS[0]}. Before the kernels (graphed, fp32, H100, measured: {BEFORE_FIXED_S * 1e3:.4f} ms +"
        f" {BEFORE_PER_ROW_S * 1e6:.2f} us x B0): {before}."
    )
    return lines


def measured_row(name: str, predicted: tuple[int, float] | None, measured: tuple[float, float] | None) -> list[str]:
    """A kernel's row of measured_table: "-" where one side has no figure."""
    calls, us = predicted if predicted else (0, None)
    m_us, m_calls = measured if measured else (None, None)
    both = us is not None and m_us is not None and us > 0
    return [
        name,
        str(calls),
        "-" if m_calls is None else f"{m_calls:g}",
        "-" if us is None else f"{us:.1f}",
        "-" if m_us is None else f"{m_us:.1f}",
        f"{m_us / us:.2f}" if both else "-",
    ]


def measured_table(planned: list[Planned], measured: Measured, costs: Costs) -> list[str]:
    """Per kernel, the predicted and the measured microseconds per decoder step (at the measurement's
    B0, GPU, precision group and design), and the total of the kernels both have."""
    group, design = measured_precision(measured), measured_design(measured)
    mine = [p for p in planned if p.group == group and design in p.designs]
    predicted = {}
    for p in mine:
        calls, us = predicted.get(p.step.kernel, (0, 0.0))
        predicted[p.step.kernel] = (calls + 1, us + 1e6 * p.predicted(measured.b0, measured.gpu, costs).seconds)
    names = list(dict.fromkeys([*predicted, *measured.kernels]))
    rows = [measured_row(n, predicted.get(n), measured.kernels.get(n)) for n in names]
    both = [n for n in names if n in predicted and n in measured.kernels]
    total = measured_row(
        "total, the kernels both have",
        (0, sum(predicted[n][1] for n in both)),
        (sum(measured.kernels[n][0] for n in both), 0.0),
    )
    rows.append([total[0], "", "", *total[3:]])
    head = (
        f"Measured on {measured.device}, B0 {measured.b0}, {measured.precision} (predicted: {measured.gpu.name},"
        f" {group}, the {design} design)"
    )
    return [head, *markdown_table(MEASURED_COLUMNS, rows)]
