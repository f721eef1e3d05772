"""scripts/bench/step.py --kernel-times (scripts/bench/kernel_times.py): each variant's kernels per decoder
step from torch.profiler (on the CPU its operations), printed and written as JSON in the format the GPU
window's readers take; the fused kernels by their function names, the longest others by name, the rest
summed as "other", nothing lost on the way."""

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from model.ops import KERNELS
from scripts.bench.kernel_times import OTHER, canonical, per_decoder_step, precision_name

NAMES = st.sampled_from([*KERNELS, "lstm_forward_kernel_0d1d", "aten::mm", "gemm", "copy", "elementwise", "x"])


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.tuples(NAMES, st.floats(0.0, 1e4, allow_subnormal=False)), max_size=40),
    steps=st.integers(1, 1000),
    top=st.integers(0, 5),
)
def test_per_decoder_step_keeps_every_microsecond_and_call(records, steps, top):
    """Summed back over the decoder steps, the kept kernels and OTHER hold all the time and calls; the
    fused kernels are kept by their function names whatever their rank, at most `top` others by name."""
    kernels = per_decoder_step(records, steps, top)
    assert sum(k["us_per_decoder_step"] for k in kernels.values()) * steps == pytest.approx(
        sum(us for _, us in records), rel=1e-9, abs=1e-6
    )
    assert round(sum(k["calls_per_decoder_step"] for k in kernels.values()) * steps) == len(records)
    fused = {canonical(name) for name, _ in records} & set(KERNELS)
    assert fused <= set(kernels)
    assert len(set(kernels) - set(KERNELS) - {OTHER}) <= top
    times = [k["us_per_decoder_step"] for name, k in kernels.items() if name not in KERNELS and name != OTHER]
    assert times == sorted(times, reverse=True)


def test_a_fused_kernels_suffix_is_dropped_and_precisions_are_named():
    assert canonical("attention_chain_backward_kernel_0d1d2d") == "attention_chain_backward_kernel"
    assert (
        canonical("void at::native::vectorized_elementwise_kernel<4>")
        == "void at::native::vectorized_elementwise_kernel<4>"
    )
    assert [precision_name("off", "highest"), precision_name("off", "high"), precision_name("bf16", "highest")] == [
        "fp32",
        "tf32",
        "bf16",
    ]


def test_the_profiler_records_each_cpu_operation_once():
    import torch

    from scripts.bench.kernel_times import profiled

    a = torch.randn(32, 32)
    records = profiled(lambda: [a @ a for _ in range(3)], torch.device("cpu"))
    assert [name for name, _ in records].count("aten::mm") == 3 and all(us >= 0 for _, us in records)


@pytest.mark.slow
def test_bench_step_writes_each_named_variants_kernels_per_decoder_step(tmp_path, capsys):
    """In-process, a synthetic lengths file and the micro model, one batch: --variants graphed profiles
    graphed only (eager and fast run as always, unprofiled); its table is printed under its caption and
    its JSON has exactly the window's keys, CPU operations per decoder step on the CPU. The process is
    left as it was: its threads, and denormals (hypothesis cannot draw floats where they are flushed)."""
    from scripts.bench.step import main
    from tests.test_scripts_reproduction import markdown_tables, synthetic_lengths

    lengths = synthetic_lengths(tmp_path, 40)
    out = tmp_path / "kernels"
    argv = ["--lengths", str(lengths), "--batches", "1", "--variants", "graphed", "--batch-size", "4"]
    threads = torch.get_num_threads()
    assert main([*argv, "--hparams", "n_frames_per_step=4,model_preset=micro", "--kernel-times", str(out)]) == 0
    assert torch.get_num_threads() == threads and torch.tensor(1e-40).item() != 0.0
    printed = capsys.readouterr().out
    timing, _, kernels = markdown_tables(printed)
    assert list(timing) == ["eager", "fast", "graphed"]
    assert "kernels of graphed: CPU operation time per decoder step, B0 4, fp32" in printed
    (path,) = out.iterdir()
    assert path.name == "kernels-b0-4-fp32-graphed.json" and f"written to {path}" in printed
    report = json.loads(path.read_text())
    assert list(report) == ["device", "b0", "precision", "variant", "kernels"]
    assert (report["b0"], report["precision"], report["variant"]) == (4, "fp32", "graphed")
    assert isinstance(report["device"], str) and report["kernels"]
    for name, figures in report["kernels"].items():
        assert set(figures) == {"us_per_decoder_step", "calls_per_decoder_step"}
        assert all(isinstance(v, float) and v >= 0 for v in figures.values()), name
    assert list(kernels) == [n[:67] + "..." if len(n) > 70 else n for n in report["kernels"]]
