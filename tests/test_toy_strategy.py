"""The strategy seam: a whole-epoch strategy with an option of its own is added by touching
`batching/` and hparams.yaml only (batching/planner.py's docstring), and then train.py --check,
`python -m batching stats` and `calibrate` work with it. Proven on a copy of the project."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import REPO, run_command

SOURCE = ("train.py", "hparams.yaml", "batching", "data", "model", "training", "scripts")

TOY = '''"""toy: samples sorted by length rounded down to toy_width frames, ties shuffled, fixed batches."""
from __future__ import annotations

import numpy as np

from .grouping import fixed_cuts
from .plan import GlobalPlan
from .sharding import arrange


def plan_toy(lengths, config, epoch, world_size):
    rng = np.random.default_rng([config.seed, epoch])
    order = np.lexsort((rng.random(lengths.size), lengths // (config.toy_width or lengths.max(initial=1) + 1)))
    cuts = fixed_cuts(order.size, config.batch_size, config.drop_last)
    order, cuts, seq = arrange(order[:cuts[-1]], cuts, lengths, world_size, config.drop_last, rng)
    return GlobalPlan(order, cuts, seq, world_size)
'''


def edit(path: Path, anchor: str, text: str) -> None:
    """Insert `text` right after `anchor`, which must occur once."""
    source = path.read_text()
    assert source.count(anchor) == 1, (path, anchor)
    path.write_text(source.replace(anchor, anchor + text))


def register_toy(root: Path) -> None:
    """What a developer writes for a new strategy: its module, its row, its planner, its option, its
    hparams key."""
    (root / "batching" / "toy.py").write_text(TOY)
    edit(
        root / "batching" / "strategies.py",
        "STRATEGY_TABLE: dict[str, Strategy] = {\n    s.name: s\n    for s in (\n",
        '        Strategy("toy", "toy length buckets (toy_width)", dbs=False, options=("toy_width",)),\n',
    )
    edit(
        root / "batching" / "planner.py",
        "from .strategies import STRATEGY_TABLE, Strategy\n",
        "from .toy import plan_toy\n",
    )
    edit(
        root / "batching" / "planner.py",
        "PLANNERS: dict[str, Callable[..., GlobalPlan]] = {\n",
        '    "toy": plan_toy,\n',
    )
    edit(root / "batching" / "config.py", "    n_frames_per_step: int = 1\n", "    toy_width: int | None = None\n")
    edit(
        root / "hparams.yaml",
        "batching (the paper)\n",
        "toy_width: null  # toy: bucket width in frames; null = one bucket\n",
    )


@pytest.fixture(scope="module")
def toy_project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("toy_project")
    for name in SOURCE:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, root / name)
    register_toy(root)
    assert changed_outside_the_seam(root) == []
    return root


def changed_outside_the_seam(root: Path) -> list[str]:
    """Files of the copy, outside batching/ and hparams.yaml, that differ from the project's."""
    copied = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return [
        str(p.relative_to(root))
        for p in copied
        if p.parts[len(root.parts)] not in ("batching", "hparams.yaml")
        and p.read_bytes() != (REPO / p.relative_to(root)).read_bytes()
    ]


def run(root: Path, *argv: str) -> subprocess.CompletedProcess:
    return run_command(sys.executable, *argv, cwd=root, timeout=300, expect=None)


def stats(root: Path, lengths: Path, hparams: str) -> dict:
    proc = run(root, "-m", "batching", "stats", "--lengths", str(lengths), "--hparams", hparams, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def lengths(tmp_path) -> Path:
    path = tmp_path / "list.txt"
    path.write_text("".join(f"w{i}.wav|text|{20 + (i * 37) % 700}\n" for i in range(400)))
    return path


def test_stats_and_calibrate_plan_the_toy_strategy_with_its_option(toy_project, lengths):
    sorted_ish, one_bucket = (
        stats(toy_project, lengths, "batching=toy,toy_width=1"),
        stats(toy_project, lengths, "batching=toy"),
    )
    assert sorted_ish["config"]["toy_width"] == 1 and one_bucket["config"]["toy_width"] is None
    assert sorted_ish["n_samples"] == one_bucket["n_samples"] == 400
    assert sorted_ish["zpr"] < one_bucket["zpr"]  # the option changes the plan

    calibrate = (
        "-m",
        "batching",
        "calibrate",
        "--lengths",
        str(lengths),
        "--split",
        "1",
        "--hparams",
        "batching=toy,toy_width=1",
    )
    proc = run(toy_project, *calibrate, "--json")
    assert proc.returncode == 0, proc.stderr
    best = json.loads(proc.stdout)
    assert {"ssb", "bkt", "ats", "stream", "toy"} <= set(best)  # the others calibrated, without toy_width
    assert best["toy"]["zpr"] == pytest.approx(sorted_ish["zpr"]) and "not calibrated" in best["toy"]["note"]
    text = run(toy_project, *calibrate).stdout
    assert re.search(r"^toy: not calibrated: toy has no parameter that calibrate tunes", text, re.M), text


@pytest.mark.slow  # train.py's imports alone take about 5 s on 2 cores
def test_train_check_plans_the_toy_strategy(toy_project, demo_corpus):
    demo = demo_corpus.demo_dir
    check = run(
        toy_project,
        "train.py",
        "--check",
        "--hparams",
        f"batching=toy,toy_width=40,demo_utterances=40,{demo_corpus.hparams},progress=false",
    )
    assert check.returncode == 0, check.stderr
    assert "data check passed" in check.stdout and "batching=toy dbs=False" in check.stdout, check.stdout
    planned = stats(toy_project, demo / "train.txt", "batching=toy,toy_width=40")  # the same plan: epoch 0, seed 0
    assert f"{planned['n_batches']} batches per epoch, ZPR {planned['zpr']:.2f}%" in check.stdout, check.stdout


@pytest.mark.parametrize(
    "hparams, message",
    [
        ("batching=toy,toy_width=0", r"toy_width=0 is invalid: expected an integer >= 1, or null"),
        ("batching=ssb,toy_width=8", r"toy_width=8 applies only to batching=toy"),
    ],
)
def test_the_toy_option_is_checked_like_any_other(toy_project, lengths, hparams, message):
    proc = run(toy_project, "-m", "batching", "stats", "--lengths", str(lengths), "--hparams", hparams)
    assert proc.returncode == 2 and re.match(rf"^error: .*{message}", proc.stderr) and proc.stderr.count("\n") == 1
