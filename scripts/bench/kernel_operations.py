"""The launches of a decoder step whose kernels the compiler's report does not compile: the split
cell's cuBLAS GEMMs, the copies of its inputs into the step's row and their gradients' casts, and
the additions of gradients both designs make; each predicted from its bytes at the bandwidth, its
floating-point operations at the GPU's peak and one memory round trip, the largest of them, plus a
launch (kernel_model.py's rule for a kernel without loops).

Why a floor. cuBLAS's kernels are chosen at run time and their SASS is not compiled here, so the
GEMMs' loops, waves and stalls are unknown: a GEMM is predicted as if it ran at the bandwidth or the
peak, whichever is slower, which favours the split design. The operations are counted from
tests/test_model_ops_lstm_split.py's and tests/test_model_fast_decoder.py's operation counts (an
eager step's launches): the split step with the fused attention is 10 + 7 operations (12 backward
under bf16 autocast), 19 launches (24), the fused step 3 + 5 operations, 12 launches (each attention
direction, and each fused cell's backward, is one operation of two kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

from scripts.bench.kernel_launches import ELEMENT_BYTES, Sizes, cell_inputs
from scripts.bench.kernel_model import Costs, Gpu, Prediction


@dataclass(frozen=True)
class Operation:
    """One launch: what it is (`kind`: "GEMMs", "row copies", "casts", "additions"), the designs that
    launch it, the bytes it moves whatever the rows (a GEMM's weights), per row of the batch, and its
    floating-point operations per row (a GEMM's 2 K N; 0 for the others)."""

    kind: str
    label: str
    designs: tuple[str, ...]
    fixed_bytes: int
    row_bytes: int
    row_flops: int = 0

    def bytes(self, rows: int) -> int:
        return self.fixed_bytes + rows * self.row_bytes


def additions(sizes: Sizes) -> list[Operation]:
    """Both designs' additions of the gradients of two values that two operations read, the context
    [B, memory] and the attention LSTM's hidden state [B, hidden], in float32: each reads two and
    writes one."""
    fp32 = ELEMENT_BYTES["fp32"]
    return [
        Operation("additions", f"addition, {name}'s gradient", ("fused", "split"), 0, 3 * width * fp32)
        for name, width in (("context", sizes.memory), ("attention hidden state", sizes.attention_hidden))
    ]


def split_cell_operations(name: str, hidden: int, widths: tuple[int, ...], group: str) -> list[Operation]:
    """One split cell (lstm_split.split_cell, deferred.step_linear): each float32 input copied into the
    row (in the compute dtype); forward the GEMM pre + row @ W^T (reading pre, the row and the weights,
    writing the gates), backward the inputs' gradient grad @ W; under bf16 the inputs' gradients cast
    back to float32, one per input."""
    fp32 = ELEMENT_BYTES["fp32"]
    each = ELEMENT_BYTES["bf16" if group == "bf16" else "fp32"]
    k, n = sum(widths), 4 * hidden
    flops = 2 * k * n
    found = [
        Operation("row copies", f"row copy, {name}, {w} columns", ("split",), 0, w * (fp32 + each)) for w in widths
    ]
    found += [
        Operation("GEMMs", f"cuBLAS GEMM forward, {name} [B, {k}] x [{k}, {n}]", ("split",), n * k * each,
                  (k + 2 * n) * each, flops),
        Operation("GEMMs", f"cuBLAS GEMM backward, {name} [B, {n}] x [{n}, {k}]", ("split",), n * k * each,
                  (n + k) * each, flops),
    ]  # fmt: skip
    if group == "bf16":
        found += [
            Operation("casts", f"cast to float32, {name}, {w} columns", ("split",), 0, w * (each + fp32))
            for w in widths
        ]
    return found


def step_operations(sizes: Sizes, group: str) -> list[Operation]:
    """Every launch of a decoder step without a compiled kernel, in either design, in `group`
    (kernel_model.GROUPS)."""
    attention, decoder = cell_inputs(sizes)
    return [
        *split_cell_operations("attention cell", sizes.attention_hidden, attention, group),
        *split_cell_operations("decoder cell", sizes.decoder_hidden, decoder, group),
        *additions(sizes),
    ]


def predict_operation(op: Operation, rows: int, gpu: Gpu, costs: Costs, group: str) -> Prediction:
    """Its bytes at the bandwidth, its operations at the peak of `group`, one round trip; and a launch."""
    return Prediction(
        bandwidth_s=op.bytes(rows) / gpu.bandwidth,
        latency_s=costs.latency_s,
        issue_s=0.0,
        launch_s=costs.launch_s,
        compute_s=rows * op.row_flops / gpu.gemm_peak(group) if op.row_flops else 0.0,
    )
