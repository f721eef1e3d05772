"""scripts/release/gpu_check.py, the one command of the first GPU session, run at toy sizes on the CPU so
that it cannot rot before a GPU comes: every part runs, the CUDA-only checks say they were
skipped and why, nothing fails, and the report names every check."""
import inspect
import json
import sys

import pytest
from _pytest.fixtures import FixtureFunctionDefinition

from tests.kit import run_command


@pytest.mark.slow
def test_gpu_check_runs_every_part_at_toy_sizes_on_the_cpu(tmp_path):
    out = tmp_path / "report"
    done = run_command(sys.executable, "-m", "scripts.release.gpu_check", "--device", "cpu", "--tiny", "--out", out, timeout=900)
    checks = {c["name"]: c for c in json.loads((out / "report.json").read_text())}
    assert {c["part"] for c in checks.values()} == {"env", "tests", "train", "bench", "graphed"}
    skipped = {name for name, c in checks.items() if c["ok"] is None}
    assert skipped <= {"cuda-tests", "train-bf16", "train-fp16", "bench"}, skipped
    assert {"cuda-tests", "train-bf16", "train-fp16"} <= skipped  # no CUDA here
    assert not [name for name, c in checks.items() if c["ok"] is False]
    assert checks["env"]["figures"]["matmul_fp32_tflops"] > 0
    assert checks["graphed-tracks-eager"]["figures"]["eager"] == pytest.approx(
        checks["graphed-tracks-eager"]["figures"]["graphed"], rel=1e-5)
    report = (out / "report.md").read_text()
    assert all(f"| {name} |" in report for name in checks)
    if checks["bench-step"]["ok"]:  # the bench part ran (it needs ../shared's LJSpeech lengths)
        assert report.index("## bench-step") < report.index("## ops per decoder step")
    assert done.stdout.strip().splitlines()[-1].startswith("gpu-check: ")


def test_gpu_check_refuses_cuda_without_a_gpu_and_unknown_parts(tmp_path):
    from scripts.release import gpu_check

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
            parametrized = {arg.strip() for mark in getattr(test, "pytestmark", []) if mark.name == "parametrize"
                            for arg in mark.args[0].split(",")}
            asked |= set(inspect.signature(test).parameters) - parametrized
    assert "demo_corpus" in asked and asked - pytests_own <= own, asked - pytests_own - own


def test_the_report_puts_each_table_of_bench_step_under_its_own_heading(tmp_path):
    """bench.step prints its timing table and its ATen ops per decoder step; the report shows each
    under its own heading, not glued into one table."""
    from scripts.common import markdown_tables
    from scripts.release import gpu_check

    output = ("Training step, ...\n\n| variant | us / decoder step |\n|---|---|\n| eager | 10 |\n\n"
              "ops per decoder step: ATen compute operations\n\n| variant | forward |\n|---|---|\n| eager | 47.0 |\n"
              "\nfast/eager speed ratio: 1.30\n")
    tables = dict(zip(("bench-step", gpu_check.OPS_HEADING), markdown_tables(output)))
    setup = gpu_check.Setup("cpu", True, tmp_path, 1)
    gpu_check.write_report(setup, [gpu_check.Check("bench", "bench-step", True, 1.0, "exit 0", {"tables": tables})])
    report = (tmp_path / "report.md").read_text()
    step, ops = report.split("## bench-step\n\n", 1)[1].split("\n\n## ops per decoder step\n\n")
    assert step.splitlines() == ["| variant | us / decoder step |", "|---|---|", "| eager | 10 |"]
    assert ops.splitlines() == ["| variant | forward |", "|---|---|", "| eager | 47.0 |"]
    assert "| bench | bench-step | ok | 1.0 | exit 0 |" in report
