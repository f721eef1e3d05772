"""scripts/release/gpu_check/, the one command of a first run on a GPU (command.py and a module
per part), run at toy sizes on the CPU so that it cannot rot before a GPU comes: every part runs, the
CUDA-only checks say they were skipped and why, nothing fails, and the report names every check."""

import functools
import inspect
import json
from pathlib import Path

import pytest
from _pytest.fixtures import FixtureFunctionDefinition

from training.checkpoint import load_checkpoint
from training.rundir import LAST


def run_gpu_check(out: Path, parts: str, skipped_at_most: set[str], capsys) -> tuple[dict, str]:
    """`make gpu-check ARGS="--device cpu --tiny --parts PARTS"` (its main here: each check runs in a
    process of its own anyway, and one start-up less saves seconds): it runs those parts and only
    them, nothing fails, the CUDA-only checks (at most `skipped_at_most`) are skipped, the report has
    a row for every check and the summary is the last line. Its checks by name, and report.md."""
    from scripts.release.gpu_check import command as gpu_check

    assert gpu_check.main(["--device", "cpu", "--tiny", "--parts", parts, "--out", str(out)]) == 0
    checks = {c["name"]: c for c in json.loads((out / "report.json").read_text())}
    assert {c["part"] for c in checks.values()} == set(parts.split(","))
    skipped = {name for name, c in checks.items() if c["ok"] is None}
    assert skipped <= skipped_at_most, skipped
    assert not [name for name, c in checks.items() if c["ok"] is False]
    report = (out / "report.md").read_text()
    assert all(f"| {name} |" in report for name in checks)
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("gpu-check: ")
    return checks, report


# The five parts at toy sizes on the CPU, in two tests that the two pytest-xdist workers run side by
# side (one run of every part took the suite's longest test); they sit apart in this file so that
# neither waits queued behind the other, and test_every_part_runs_by_default_into_one_report shows
# that a plain run runs all five.
@pytest.mark.slow
def test_gpu_check_trains_resumes_synthesises_and_runs_ddp_on_the_cpu(tmp_path, capsys):
    checks, _ = run_gpu_check(tmp_path / "report", "train", {"train-bf16", "train-fp16"}, capsys)
    assert {"train-bf16", "train-fp16"} <= {name for name, c in checks.items() if c["ok"] is None}  # no CUDA here
    assert {"train-fp32", "train-resume", "synthesis", "ddp-one-process", "ddp-two-ranks-graphed"} <= set(checks)
    # force_ddp=true in one process started without torchrun: DDP over a process group of one (gloo here, NCCL
    # on a GPU); its check passed on "parameters identical on all 1 ranks", and the checkpoint says so too
    assert load_checkpoint(tmp_path / "report" / "ddp-one-process" / LAST)["world_size"] == 1


def stub_part(part: str, setup) -> list:
    """A part that only names itself (test_every_part_runs_by_default_into_one_report)."""
    from scripts.release.gpu_check.checks import Check

    return [Check(part, f"{part}-stub", True, 0.0, f"{setup.device} stub")]


def test_every_part_runs_by_default_into_one_report(tmp_path, monkeypatch, capsys):
    """Without --parts, gpu_check runs env, tests, train, bench, graphed and fill in that order, and one
    report (report.json, report.md) and the summary line name every check."""
    from scripts.release.gpu_check import command as gpu_check

    for part in gpu_check.PARTS:
        monkeypatch.setitem(gpu_check.PART_RUNNERS, part, functools.partial(stub_part, part))
    assert gpu_check.main(["--device", "cpu", "--tiny", "--out", str(tmp_path)]) == 0
    checks = json.loads((tmp_path / "report.json").read_text())
    assert [c["part"] for c in checks] == list(gpu_check.PARTS) == ["env", "tests", "train", "bench", "graphed", "fill"]
    report = (tmp_path / "report.md").read_text()
    assert all(f"| {part} | {part}-stub | ok |" in report for part in gpu_check.PARTS)
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("gpu-check: 6 ok, 0 failed, 0 skipped")


def test_gpu_check_refuses_cuda_without_a_gpu_and_unknown_parts(tmp_path):
    from scripts.release.gpu_check import command as gpu_check

    assert gpu_check.main(["--parts", "env,nope", "--out", str(tmp_path)]) == 2
    if not gpu_check.cuda_available():
        assert gpu_check.main(["--device", "cuda", "--out", str(tmp_path)]) == 2


def test_the_cuda_tests_ask_for_no_fixture_of_conftest():
    """gpu_check runs tests/test_cuda.py alone with --noconftest (the suite's guards are not its
    business): every fixture its tests ask for is pytest's own or defined in (imported into) it.
    On a machine without CUDA its tests skip before any fixture is looked up, so only this shows it."""
    import tests.test_cuda as cuda_tests

    own = {name for name, value in vars(cuda_tests).items() if isinstance(value, FixtureFunctionDefinition)}
    pytests_own = {"tmp_path", "tmp_path_factory", "monkeypatch", "request", "capsys"}
    asked = set()
    for name, test in vars(cuda_tests).items():
        if name.startswith("test_"):
            parametrized = {
                arg.strip()
                for mark in getattr(test, "pytestmark", [])
                if mark.name == "parametrize"
                for arg in mark.args[0].split(",")
            }
            asked |= set(inspect.signature(test).parameters) - parametrized
    assert "demo_corpus" in asked and asked - pytests_own <= own, asked - pytests_own - own


def test_the_report_puts_each_table_of_bench_step_under_its_own_heading(tmp_path):
    """bench.step prints its timing table and its ATen ops per decoder step; the report shows each
    under its own heading, not glued into one table."""
    from scripts.common import OPS_HEADING, markdown_tables
    from scripts.release.gpu_check import command as gpu_check
    from scripts.release.gpu_check.checks import Check, Setup

    output = (
        "Training step, ...\n\n| variant | us / decoder step |\n|---|---|\n| eager | 10 |\n\n"
        "ops per decoder step: ATen compute operations\n\n| variant | forward |\n|---|---|\n| eager | 47.0 |\n"
        "\nfast/eager speed ratio: 1.30\n"
    )
    tables = dict(zip(("bench-step", OPS_HEADING), markdown_tables(output)))
    setup = Setup("cpu", True, tmp_path, 1)
    gpu_check.write_report(setup, [Check("bench", "bench-step", True, 1.0, "exit 0", {"tables": tables})])
    report = (tmp_path / "report.md").read_text()
    step, ops = report.split("## bench-step\n\n", 1)[1].split("\n\n## ops per decoder step\n\n")
    assert step.splitlines() == ["| variant | us / decoder step |", "|---|---|", "| eager | 10 |"]
    assert ops.splitlines() == ["| variant | forward |", "|---|---|", "| eager | 47.0 |"]
    assert "| bench | bench-step | ok | 1.0 | exit 0 |" in report


@pytest.mark.slow
def test_gpu_check_measures_tests_benches_and_graphs_on_the_cpu(tmp_path, capsys):
    checks, report = run_gpu_check(tmp_path / "report", "env,tests,bench,graphed", {"cuda-tests", "bench"}, capsys)
    assert "cuda-tests" in {name for name, c in checks.items() if c["ok"] is None}  # no CUDA here
    assert checks["env"]["figures"]["matmul_fp32_tflops"] > 0
    assert checks["graphed-tracks-eager"]["figures"]["eager"] == pytest.approx(
        checks["graphed-tracks-eager"]["figures"]["graphed"], rel=1e-5
    )
    if "bench-step" in checks:  # the bench part ran (it needs ../shared's LJSpeech lengths)
        assert report.index("## bench-step") < report.index("## ops per decoder step")


@pytest.mark.slow
def test_the_fill_part_measures_a_cell_and_skips_what_needs_cuda(tmp_path, ljspeech_lengths_tsv):
    """--tiny on the CPU: B0 4 in fp32 through scripts.bench.step on the recipe's default SSB (its
    two tables under their headings, the graphed variant's figures in the detail), TF32 skipped."""
    from scripts.release.gpu_check.checks import Setup
    from scripts.release.gpu_check.fill import fill_part

    fp32, tf32 = fill_part(Setup("cpu", True, tmp_path, 300))
    assert (fp32.name, fp32.ok, tf32.name, tf32.ok) == ("fill-b0-4-fp32", True, "fill-b0-4-tf32", None)
    assert "graphed" in fp32.detail and "us/step" in fp32.detail and tf32.detail == "tf32 needs CUDA"
    assert list(fp32.figures["tables"]) == ["fill: B0 4, fp32", "fill: B0 4, fp32, ops per decoder step"]


def stub_cell(ok: bool | None, setup):
    """A cell that returns at once, naming the limit it was given."""
    from scripts.release.gpu_check.checks import Check

    return Check("stub", "stub", ok, 0.5, f"stub, limit {setup.timeout} s")


def crashing_cell(setup):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def sleeping_cell(setup):
    """A cell whose process outlives its limit: run_logged stops it (exit 124)."""
    import sys

    from scripts.release.gpu_check.checks import Check, run_logged

    code, _, seconds = run_logged(setup, "sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    return Check("stub", "sleeper", code == 0, seconds, f"exit {code}")


def test_the_window_gives_each_cell_a_limit_and_a_failure_costs_only_its_cell(tmp_path, capsys):
    """One deadline: each cell's limit comes from what is left (at most twice its estimate); a crash, a
    cell stopped at its limit and a CUDA-only cell on the CPU cost only themselves, a cell whose estimate
    does not fit is skipped with the reason, and the cells after them still run. report.json, report.md
    and summary.md name every cell; the summary is printed last."""
    from scripts.release.gpu_check import window
    from scripts.release.gpu_check.checks import Setup

    cells = [
        window.Cell("a", "first", 1, functools.partial(stub_cell, True)),
        window.Cell("a", "crash", 1, crashing_cell),
        window.Cell("b", "sleeper", 1, sleeping_cell),
        window.Cell("b", "too-long", 1000, functools.partial(stub_cell, True)),
        window.Cell("c", "memory-b0-128", 1, functools.partial(stub_cell, True)),
        window.Cell("c", "last", 3, functools.partial(stub_cell, True)),
    ]
    setup = Setup("cpu", True, tmp_path, 540)
    deadline = window.RESERVE + 20
    checks = {c.name: c for c in window.run_window(setup, cells, deadline)}
    assert list(checks) == [cell.name for cell in cells]
    assert checks["first"].ok and checks["first"].detail == f"stub, limit {window.LIMIT_FACTOR * 1} s"
    assert checks["crash"].ok is False and checks["crash"].detail.startswith("RuntimeError: CUDA error")
    sleeper = checks["sleeper"]
    assert sleeper.ok is False and sleeper.detail == "stopped at its 2 s limit; exit 124" and sleeper.seconds < 10
    assert checks["too-long"].ok is None and checks["too-long"].detail.startswith("does not fit: needs about 1000 s")
    assert checks["memory-b0-128"].ok is None and "CUDA" in checks["memory-b0-128"].detail
    assert checks["last"].ok and checks["last"].detail == "stub, limit 6 s"
    saved = json.loads((tmp_path / "report.json").read_text())
    assert [(c["part"], c["name"]) for c in saved] == [(cell.group, cell.name) for cell in cells]
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# GPU window, ") and "| b | sleeper | FAILED |" in report
    summary = (tmp_path / "summary.md").read_text().splitlines()
    assert summary[0].startswith("GPU window on cpu") and "2 ok, 2 failed, 2 skipped" in summary[0]
    assert all(f"| {cell.name} |" in "\n".join(summary) for cell in cells)
    assert len(summary) <= 25  # one screen
    assert capsys.readouterr().out.strip().splitlines()[-len(summary) :] == summary


def test_the_window_refuses_parts(tmp_path, capsys):
    from scripts.release.gpu_check import command as gpu_check

    assert gpu_check.main(["--window", "--parts", "env", "--device", "cpu", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: --window --parts env: the window runs its own cells")


@pytest.mark.slow
def test_the_windows_cpu_dry_run_writes_the_whole_report(tmp_path, capsys, ljspeech_lengths_tsv):
    """`make gpu-window` on the CPU (--device cpu --tiny): env and B0 4 in fp32 through bench.step run, with
    each graphed variant's kernels per decoder step as JSON; what needs CUDA is skipped with the reason;
    the report, the summary and the logs all under OUT."""
    from scripts.release.gpu_check import command as gpu_check

    assert gpu_check.main(["--window", "--device", "cpu", "--tiny", "--out", str(tmp_path)]) == 0
    checks = {c["name"]: c for c in json.loads((tmp_path / "report.json").read_text())}
    assert list(checks) == [
        "env",
        "cuda-tests-fused",
        "fill-b0-4-fp32",
        "fill-b0-4-tf32",
        "fill-b0-8-tf32",
        "fill-b0-8-bf16",
        "memory-b0-128",
        "batch-size-auto",
    ]
    assert {name for name, c in checks.items() if c["ok"]} == {"env", "fill-b0-4-fp32"}
    assert all(c["detail"] for c in checks.values() if c["ok"] is None)
    assert checks["env"]["figures"]["triton"]
    fill = checks["fill-b0-4-fp32"]["figures"]
    assert list(fill["tables"])[2:] == ["fill: B0 4, fp32, kernels of graphed"]  # fused and split need CUDA
    (path,) = (tmp_path / "kernels").iterdir()
    report = json.loads(path.read_text())
    assert path.name == "kernels-b0-4-fp32-graphed.json" and list(report) == [
        "device",
        "b0",
        "precision",
        "variant",
        "kernels",
    ]
    assert all(set(k) == {"us_per_decoder_step", "calls_per_decoder_step"} for k in report["kernels"].values())
    summary = (tmp_path / "summary.md").read_text()
    assert (
        "2 ok, 0 failed, 6 skipped" in summary.splitlines()[0]
        and "fill-b0-4-fp32: us / decoder step graphed" in summary
    )
    assert capsys.readouterr().out.strip().endswith(summary.strip())
    assert {p.name for p in (tmp_path / "logs").iterdir()} == {"fill-b0-4-fp32.log"}


def test_capacity_needs_cuda_reads_the_recipes_run_and_answers_as_the_window_reads(tmp_path, capsys, monkeypatch):
    """scripts.release.gpu_check.capacity refuses the CPU with one error line; its setup is the recipe's
    LJSpeech run (full model, graph_bucket 64) on the training split of the lengths given; its answers
    (here with the GPU's parts stubbed: fits, the probe, the allocator's history) match what the window
    reads, and the snapshot leaves the allocator's history off."""
    import re

    import torch

    from scripts.release.gpu_check import capacity
    from scripts.release.gpu_check.window import CAPACITY_ANSWERS
    from tests.test_scripts_reproduction import synthetic_lengths

    assert capacity.main(["probe", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --device cpu: needs a CUDA GPU"), err
    setup = capacity.probe_setup(synthetic_lengths(tmp_path, 40), "matmul_precision=high", torch.device("cpu"))
    assert (setup.train.graph_bucket, setup.train.matmul_precision, setup.model.attention_rnn_dim) == (64, "high", 1024)
    assert len(setup.frames) == len(setup.text_lengths) == 32  # the 80 % training split
    history = []
    monkeypatch.setattr(capacity, "fits", lambda setup, b0: b0 <= 96)
    monkeypatch.setattr(capacity, "probe_b0", lambda setup: 96)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda **kw: history.append(kw))
    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", lambda path: open(path, "wb").close())
    capacity.snapshot(setup, 128, tmp_path / "memory" / "b0-128.pickle")
    capacity.probe(setup)
    out = capsys.readouterr().out
    assert re.findall(CAPACITY_ANSWERS["snapshot"], out) == ["B0 128 does not fit"]
    assert re.findall(CAPACITY_ANSWERS["probe"], out) == ["batch_size=auto: B0 = 96"]
    assert (tmp_path / "memory" / "b0-128.pickle").is_file() and history[-1] == {"enabled": None}
