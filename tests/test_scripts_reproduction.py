"""The paper-reproduction scripts: table2.sh + make_tables.py end to end on the demo corpus (every
number checked against the runs' metrics.jsonl, recomputed here), the smoothing and scaling
maths on hand-written metrics, table1.sh on LJSpeech lengths, bench.epoch, and the Docker files.
"""

import importlib.metadata
import json
import os
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.kit import DEMO_UTTERANCES, REPO, run_command

NAMES = ["RAND", "SB-BR", "SSB-BR", "BKT-BR", "ATS-BR", "SB", "SSB", "SB-DBS", "SSB-DBS", "SSB-DBS-BR"]
TABLE4 = [
    ("SB", "SSB"),
    ("SB-BR", "SSB-BR"),
    ("SB-DBS", "SSB-DBS"),
    ("SB", "SB-BR"),
    ("SSB", "SSB-BR"),
    ("SSB-DBS", "SSB-DBS-BR"),
    ("SB", "SB-DBS"),
    ("SSB", "SSB-DBS"),
    ("SSB-BR", "SSB-DBS-BR"),
]
PAPER_TABLE3 = {"SB-BR": (12.00, 36.57), "SSB-BR": (9.84, 29.98), "SSB-DBS-BR": (13.54, 41.25)}
TINY = (
    "model.symbols_embedding_dim=16,model.encoder_embedding_dim=16,model.attention_rnn_dim=32,"
    "model.decoder_rnn_dim=32,model.prenet_dim=16,model.attention_dim=16,"
    "model.attention_location_n_filters=4,model.postnet_embedding_dim=16,device=cpu"
)
# One torch thread: on a busy shared CPU, two threads waiting on each other make a step ~100x slower.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHON": sys.executable}


def run(*args: str | Path) -> str:
    """Run a command in the checkout (ENV); fail the test with its output if it fails; its stdout."""
    return run_command(*args, env=ENV).stdout


def make_tables(root: Path, *extra: str) -> tuple[dict[str, list[list[str]]], dict]:
    """Run make_tables.py; return its Markdown tables by section title, and its JSON."""
    run(sys.executable, "-m", "scripts.reproduction.make_tables", root, "--out", root / "tables", *extra)
    sections, title = {}, None
    for line in (root / "tables" / "tables.md").read_text().splitlines():
        if line.startswith("## "):
            title = line[3:].split(":")[0]
            sections[title] = []
        elif line.startswith("| ") and title:
            sections[title].append([c.strip() for c in line.strip("|").split("|")])
    return {k: rows[1:] for k, rows in sections.items()}, json.loads((root / "tables" / "tables.json").read_text())


def same(text: str, expected: float | None) -> bool:
    """A printed cell equals `expected` to the digits it shows (an empty cell means no value)."""
    if expected is None or text == "":
        return expected is None and text == ""
    text = text.split(" ± ")[0]
    if "e" in text:
        return abs(float(text) - expected) <= 5e-4 * abs(expected)
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text) - expected) <= 0.5 * 10**-decimals + 1e-12


def mean(values):
    return sum(values) / len(values) if values else None


def expected_row(records: list[dict], stages: list[int], key: str = "val_loss_padded") -> dict:
    """Table 2 by the paper's definitions: VL at an epoch = mean of that validation and its
    neighbours; VLavg = mean of the validations in [first stage, last stage]."""
    vals = {r["epoch"] + 1: r[key] for r in records if r.get(key) is not None}
    epochs = sorted(vals)

    def smoothed(stage):
        if stage not in vals:
            return None
        i = epochs.index(stage)
        return mean([vals[e] for e in epochs[max(i - 1, 0) : i + 2]])

    vl = [smoothed(s) for s in stages]
    return {
        "epochs": len(records),
        "zpr": mean([r["zpr"] for r in records]),
        "abl": mean([r["abl"] for r in records]),
        "min_per_epoch": mean([r["train_seconds"] / 60 for r in records]),
        "vl1": vl[0],
        "vl2": vl[1],
        "vl3": vl[2],
        "vl_avg": mean([v for e, v in vals.items() if stages[0] <= e <= stages[2]]) if vl[2] is not None else None,
    }


def check_tables(tables: dict, result: dict, expected: dict[str, dict]) -> None:
    """Every measured cell of Tables 2-4, in Markdown and JSON, equals what `expected` implies."""
    columns = ["epochs", "zpr", "abl", "min_per_epoch", "vl1", "vl2", "vl3", "vl_avg"]
    table2 = tables["Table 2"]
    assert [row[0] for row in table2] == NAMES
    for row in table2:
        exp = expected.get(row[0], dict.fromkeys(columns))
        for col, text in zip(columns, row[1:]):
            assert same(text, exp[col]), (row[0], col, text, exp[col])
            got = result["table2"].get(row[0], {}).get(col)
            assert (got is None and exp[col] is None) or abs(got - exp[col]) < 1e-12, (row[0], col)
    rand = expected.get("RAND", {}).get("min_per_epoch")
    table3 = tables["Table 3"]
    assert [row[0] for row in table3] == NAMES[1:]
    for name, saved, rate, paper_saved, paper_rate in table3:
        minutes = expected.get(name, {}).get("min_per_epoch")
        ok = rand is not None and minutes is not None
        assert same(saved, rand - minutes if ok else None) and same(rate, 100 * (rand - minutes) / rand if ok else None)
        paper = PAPER_TABLE3.get(name, (None, None))
        assert same(paper_saved, paper[0]) and same(paper_rate, paper[1])
    pairs = [row for row in tables["Table 4"] if not row[0].startswith("**")]
    assert [(row[0], row[2]) for row in pairs] == TABLE4
    for a, vl_a, b, vl_b, rate, _paper in pairs:
        va, vb = expected.get(a, {}).get("vl3"), expected.get(b, {}).get("vl3")
        assert same(vl_a, va) and same(vl_b, vb)
        assert same(rate, None if va is None or vb is None else 100 * (va - vb) / va)


def write_run(root: Path, name: str, records: list[dict], validate_every: int = 2, seed: int = 0) -> None:
    run_dir = root / name / f"seed{seed}"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run_dir / "hparams.json").write_text(json.dumps({"validate_every": validate_every}))


def synthetic(epochs: int, offset: float, every: int = 2) -> list[dict]:
    """Epoch records shaped like train.py's, with validation losses that differ at every epoch."""
    records = []
    for e in range(epochs):
        r = {
            "epoch": e,
            "zpr": 30 - offset + e % 3,
            "abl": 700 + e % 5 - offset,
            "train_seconds": 90 + 7 * offset + e % 4,
            "steps": 20 - round(offset),
        }
        if (e + 1) % every == 0 or e + 1 == epochs:
            r |= {
                "val_loss_padded": 1 / (e + 2) + offset / 100 + (e % 3) / 1000,
                "val_loss_valid": 2 / (e + 2) + offset / 50,
            }
        records.append(r)
    return records


def png_width(path: Path) -> int:
    """A PNG's width in pixels, from its IHDR chunk."""
    return int.from_bytes(path.read_bytes()[16:20], "big")


def test_make_tables_maths_on_paper_length_runs(tmp_path):
    """220 epochs: VL1-3 at 100/160/220 exactly as hand-computed; missing runs leave empty cells."""
    runs = {name: synthetic(220, i) for i, name in enumerate(["RAND", "SB", "SSB", "SSB-BR", "SSB-DBS-BR"])}
    for name, records in runs.items():
        write_run(tmp_path, name, records)
    tables, result = make_tables(tmp_path)
    assert result["stage_epochs"] == [100, 160, 220] and result["total_epochs"] == 220
    rand = {r["epoch"] + 1: r["val_loss_padded"] for r in runs["RAND"] if "val_loss_padded" in r}
    assert result["table2"]["RAND"]["vl1"] == pytest.approx((rand[98] + rand[100] + rand[102]) / 3, abs=1e-15)
    assert result["table2"]["RAND"]["vl2"] == pytest.approx((rand[158] + rand[160] + rand[162]) / 3, abs=1e-15)
    assert result["table2"]["RAND"]["vl3"] == pytest.approx((rand[218] + rand[220]) / 2, abs=1e-15)
    assert result["table2"]["RAND"]["vl_avg"] == pytest.approx(mean([rand[e] for e in range(100, 221, 2)]), abs=1e-15)
    check_tables(tables, result, {n: expected_row(r, [100, 160, 220]) for n, r in runs.items()})
    assert set(result["missing"]) == set(NAMES) - set(runs)
    assert not any("scaled" in note for note in result["notes"])
    assert (tmp_path / "tables" / "fig4_val_loss.png").stat().st_size > 0


def test_make_tables_scales_short_runs_and_switches_the_loss(tmp_path):
    """20 epochs: epochs 100/160/220 become 10/14/20 (x 20/220, nearest validation), and says so."""
    runs = {"RAND": synthetic(20, 0), "SSB-DBS-BR": synthetic(20, 1), "SB": synthetic(13, 2)}
    runs["SSB-DBS-BR"][3].pop("steps")  # a record from before the `steps` field: no step budget for it
    for name, records in runs.items():
        write_run(tmp_path, name, records)
    tables, result = make_tables(tmp_path, "--val-loss", "valid")
    assert result["stage_epochs"] == [10, 14, 20]
    assert any("20/220" in note for note in result["notes"]) and result["unfinished"] == {"SB/seed0": 13}
    check_tables(tables, result, {n: expected_row(r, [10, 14, 20], "val_loss_valid") for n, r in runs.items()})
    assert result["table2"]["SB"]["vl2"] is None and result["table2"]["SB"]["vl1"] is not None
    assert all(c["loss"] is None for c in result["equal_steps"]["rows"]["SSB-DBS-BR"])
    assert result["equal_steps"]["rows"]["RAND"][0]["epoch"] == 10
    assert png_width(tmp_path / "tables" / "fig4_val_loss.png") == 2 * 6 * 120  # two panels: no steps one


def test_make_tables_seeds_mean_spread_equal_time_and_figure(tmp_path):
    """Three seeds: each cell is the seeds' mean, VL cells add the sample sd; the equal-time (-steps)
    table takes each seed's last validation within RAND's mean training minutes (steps) at the
    stage epochs."""
    runs = {
        (name, seed): synthetic(20, offset + seed / 3)
        for name, offset in (("RAND", 0), ("SSB-DBS-BR", 1))
        for seed in range(3)
    }
    for (name, seed), records in runs.items():
        write_run(tmp_path, name, records, seed=seed)
    tables, result = make_tables(tmp_path)
    stages = [10, 14, 20]
    for name in ("RAND", "SSB-DBS-BR"):
        rows = [expected_row(runs[name, seed], stages) for seed in range(3)]
        got = result["table2"][name]
        assert got["seeds"] == [0, 1, 2]
        for col in ("zpr", "abl", "min_per_epoch", "vl1", "vl2", "vl3", "vl_avg"):
            assert got[col] == pytest.approx(mean([r[col] for r in rows]), rel=1e-12)
        for col in ("vl1", "vl3"):
            values = [r[col] for r in rows]
            sd = (sum((v - mean(values)) ** 2 for v in values) / 2) ** 0.5
            assert got[col + "_sd"] == pytest.approx(sd, rel=1e-9) and sd > 0
        printed = {row[0]: row for row in tables["Table 2"]}[name]
        assert printed[7] == f"{got['vl3']:.4f} ± {got['vl3_sd']:.4f}"
    # SSB-DBS-BR's synthetic epochs are slower (it reaches fewer within RAND's minutes) and have
    # fewer steps (it reaches more within RAND's steps)
    for key, field, scale, fewer in (("equal_time", "train_seconds", 1 / 60, True), ("equal_steps", "steps", 1, False)):
        used = {
            (n, s): [sum(r[field] for r in recs[:e]) * scale for e in range(1, 21)] for (n, s), recs in runs.items()
        }
        budgets = [mean([used["RAND", s][e - 1] for s in range(3)]) for e in stages]
        assert result[key]["budgets"] == pytest.approx(budgets, rel=1e-12)
        for i, budget in enumerate(budgets):
            hits = []
            for s in range(3):
                vals = [
                    (e, r["val_loss_padded"])
                    for e, r in enumerate(runs["SSB-DBS-BR", s], 1)
                    if "val_loss_padded" in r and used["SSB-DBS-BR", s][e - 1] <= budget
                ]
                hits.append(vals[-1])
            cell = result[key]["rows"]["SSB-DBS-BR"][i]
            assert cell["loss"] == pytest.approx(mean([h[1] for h in hits]), rel=1e-12)
            assert cell["epoch"] == pytest.approx(mean([h[0] for h in hits]))
            assert cell["epoch"] < stages[i] if fewer else cell["epoch"] >= stages[i]
    assert tables["Equal training time"][0][0] == "RAND" and tables["Equal optimiser steps"][1][0] == "SSB-DBS-BR"
    assert (tmp_path / "tables" / "fig4_val_loss.png").stat().st_size > 10_000
    assert png_width(tmp_path / "tables" / "fig4_val_loss.png") == 3 * 6 * 120  # epochs, minutes, steps
    _, only = make_tables(tmp_path, "--seeds", "2,0")  # e.g. leaving out a seed still running
    rows = [expected_row(runs["RAND", seed], stages) for seed in (0, 2)]
    assert only["table2"]["RAND"]["seeds"] == [0, 2]
    assert only["table2"]["RAND"]["vl3"] == pytest.approx(mean([r["vl3"] for r in rows]), rel=1e-12)


def test_make_tables_adds_a_variant_sweep_beside_the_main_one(tmp_path):
    """--variant LABEL=DIR: DIR's experiments become rows 'NAME (LABEL)' of Table 2, the equal-time
    table and the JSON, with the same maths; the main rows are unchanged; a bad spec is refused."""
    main, variant = tmp_path / "main", tmp_path / "lr-sqrt"
    runs = {"RAND": synthetic(20, 0), "SSB-DBS-BR": synthetic(20, 1)}
    for name, records in runs.items():
        write_run(main, name, records)
    sqrt = synthetic(20, 0.5)
    write_run(variant, "SSB-DBS-BR", sqrt)
    tables, result = make_tables(main, "--variant", f"lr sqrt={variant}")
    stages = [10, 14, 20]
    got, expected = result["table2"]["SSB-DBS-BR (lr sqrt)"], expected_row(sqrt, stages)
    for col in ("zpr", "min_per_epoch", "vl1", "vl3", "vl_avg"):
        assert got[col] == pytest.approx(expected[col], rel=1e-12)
    assert result["table2"]["SSB-DBS-BR"]["vl3"] == pytest.approx(expected_row(runs["SSB-DBS-BR"], stages)["vl3"])
    assert [row[0] for row in tables["Table 2"]] == NAMES + ["SSB-DBS-BR (lr sqrt)"]
    assert same(tables["Table 2"][-1][7], expected["vl3"])
    assert "SSB-DBS-BR (lr sqrt)" in result["equal_time"]["rows"] and result["variants"] == {"lr sqrt": str(variant)}
    for spec in ("nolabel", f"lr sqrt={tmp_path / 'absent'}", f"a (b)={variant}"):
        done = run_command(
            sys.executable, "-m", "scripts.reproduction.make_tables", main, "--variant", spec, env=ENV, expect=None
        )
        assert done.returncode == 2 and f"--variant {spec!r}" in done.stderr, done.stderr


def test_compare_sweeps_reads_two_saved_tables_at_equal_epochs_and_steps(tmp_path):
    """compare_sweeps: every row's loss at an epoch is the trailing mean of that validation and the
    one before, per seed then over seeds; within steps it is each seed's last validation within the
    steps the base's RAND needed; a sweep that stopped earlier leaves that cell empty."""
    base, other = tmp_path / "base", tmp_path / "other"
    base_runs = {"RAND": {s: synthetic(20, s) for s in (0, 1)}, "SSB-DBS-BR": {s: synthetic(20, 5 + s) for s in (0, 1)}}
    for name, seeds in base_runs.items():
        for seed, records in seeds.items():
            write_run(base, name, records, seed=seed)
    cost = {s: synthetic(10, 3 + s) for s in (0, 1)}
    for seed, records in cost.items():
        write_run(other, "SSB-DBS-BR", records, seed=seed)
    from scripts.reproduction.table_numbers import build

    for root in (base, other):
        (root / "tables.json").write_text(json.dumps(build(root, "valid")))
    out = run(
        sys.executable,
        "-m",
        "scripts.reproduction.compare_sweeps",
        f"paper={base / 'tables.json'}",
        f"cost={other / 'tables.json'}",
        "--epochs",
        "6,10,14",
    )
    rows = {r[0]: r[1:] for r in (line.strip("|").split("|") for line in out.splitlines() if line.startswith("| "))}
    rows = {k.strip(): [c.strip() for c in v] for k, v in rows.items()}

    def at(records, epoch):
        losses = {r["epoch"] + 1: r["val_loss_valid"] for r in records if "val_loss_valid" in r}
        return None if epoch not in losses else mean([losses[epoch - 2], losses[epoch]])

    def within(records, budget):
        done, last = 0, None
        for r in records:
            done += r["steps"]
            if done > budget:
                break
            last = r.get("val_loss_valid", last)
        return last if sum(r["steps"] for r in records) >= budget else None

    rand_steps = {
        e: mean([sum(r["steps"] for r in records[:e]) for records in base_runs["RAND"].values()]) for e in (6, 10, 14)
    }
    for label, seeds in [
        ("RAND (paper)", base_runs["RAND"]),
        ("SSB-DBS-BR (paper)", base_runs["SSB-DBS-BR"]),
        ("SSB-DBS-BR (cost)", cost),
    ]:
        cells = rows[label]
        assert cells[0] == "2"
        for i, e in enumerate((6, 10, 14)):
            values = [at(r, e) for r in seeds.values()]
            assert same(cells[3 + i], None if None in values else mean(values)), (label, e, cells)
            hits = [within(r, rand_steps[e]) for r in seeds.values()]
            assert same(cells[6 + i], None if None in hits else mean(hits)), (label, e, cells)
    assert rows["SSB-DBS-BR (cost)"][5] == "" and rows["SSB-DBS-BR (paper)"][5] != ""
    no_rand = run(
        sys.executable,
        "-m",
        "scripts.reproduction.compare_sweeps",
        f"cost={other / 'tables.json'}",
        f"again={other / 'tables.json'}",
        "--epochs",
        "6",
    )
    assert "within" not in no_rand.splitlines()[-3] and "no RAND" in no_rand
    bad = run_command(
        sys.executable,
        "-m",
        "scripts.reproduction.compare_sweeps",
        f"a={base / 'tables.json'}",
        f"b={tmp_path / 'absent.json'}",
        env=ENV,
        expect=None,
    )
    assert bad.returncode == 2 and "absent.json" in bad.stderr and bad.stderr.startswith("error:")


def test_reproduction_plan_runs_each_seed_in_its_own_directory(tmp_path):
    env = ENV
    out = run_command(
        sys.executable,
        "-m",
        "scripts.reproduction",
        "plan",
        "--root",
        tmp_path,
        "--dataset",
        "demo",
        "--epochs",
        "3",
        "--only",
        "RAND,SB-BR",
        "--seeds",
        "2,0",
        "--extra",
        "seed=7,lrf=0.2",
        env=env,
    ).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("RAND", "2", "new"),
        ("SB-BR", "2", "new"),
        ("RAND", "0", "new"),
        ("SB-BR", "0", "new"),
    ]
    for name, seed, _, run_dir, hp in rows:
        assert run_dir == str(tmp_path / name / f"seed{seed}")
        assert f"seed={seed}," in hp and "lrf=0.1" in hp and f"output_dir={run_dir}" in hp  # the experiment wins
    bad = run_command(
        sys.executable,
        "-m",
        "scripts.reproduction",
        "plan",
        "--root",
        tmp_path,
        "--dataset",
        "demo",
        "--epochs",
        "3",
        "--seeds",
        "0,x",
        env=env,
        expect=None,
    )
    assert bad.returncode == 2 and "--seeds '0,x'" in bad.stderr


def test_the_papers_ssb_rows_pin_the_length_key_and_a_variant_may_calibrate_them():
    """The recipe's default SSB is the cost key calibrated to a ZPR; the Table 2 sweeps run the paper's
    unless the extras ask for an SSB variant (the quality study's arm), which other rows ignore."""
    from scripts.reproduction.__main__ import plan
    from training.config import resolve_config
    from training.hparams import load_hparams

    def batching(name, extra=""):
        hp = dict(item.split("=", 1) for item in plan([name], [0], Path("/runs"), "demo", 2, extra)[0][4].split(","))
        return resolve_config(load_hparams(hp)).batching

    paper = batching("SSB-DBS-BR")
    assert (paper.ssb_key, paper.lrf, paper.target_zpr) == ("length", 0.1, None)
    variant = batching("SSB-DBS-BR", "ssb_key=cost,target_zpr=10.04")
    assert (variant.ssb_key, variant.target_zpr) == ("cost", 10.04)
    rand = batching("RAND", "ssb_key=cost,target_zpr=10.04")
    assert (rand.batching, rand.ssb_key, rand.target_zpr) == ("rand", None, None)


def test_table2_skips_a_run_another_copy_holds(tmp_path):
    """A run whose lock another table2.sh holds is left to it, and the script says so."""
    import fcntl

    (tmp_path / "RAND").mkdir()
    with open(tmp_path / "RAND" / "seed0.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = run(
            "scripts/reproduction/table2.sh", "--dataset", "demo", "--epochs", "2", "--only", "RAND", "--out", tmp_path
        )
    assert "RAND seed 0: another copy of table2.sh is training it, skipped" in out
    assert "1 run(s) were being trained by another copy" in out and not (tmp_path / "RAND" / "seed0").exists()


@pytest.mark.slow
def test_table2_demo_runs_resumes_skips_and_tables_match_the_logs(tmp_path, demo_corpus):
    """A demo-sized table2.sh: 3 experiments x 2 epochs, two of them resumed to 3; then Tables 2-4."""
    root = tmp_path / "runs"
    extra = (
        f"demo_utterances={DEMO_UTTERANCES},{demo_corpus.hparams},batch_size=8,val_batch_size=8,progress=false,{TINY}"
    )
    out = run(
        "scripts/reproduction/table2.sh",
        "--dataset",
        "demo",
        "--epochs",
        "2",
        "--only",
        "RAND,SSB-BR,SSB-DBS-BR",
        "--out",
        root,
        "--hparams",
        extra,
    )
    assert out.count("training in") == 3
    hp = json.loads((root / "SSB-BR" / "seed0" / "hparams.json").read_text())
    assert (hp["batching"], hp["dbs"], hp["br"], hp["loss_norm"], hp["batch_size"], hp["validate_every"]) == (
        "ssb",
        False,
        True,
        "padded",
        8,
        2,
    )
    out = run(
        "scripts/reproduction/table2.sh",
        "--dataset",
        "demo",
        "--epochs",
        "3",
        "--only",
        "RAND,SSB-BR",
        "--out",
        root,
        "--hparams",
        "progress=false",
    )
    assert out.count("resuming") == 2
    assert "skipped" in run(
        "scripts/reproduction/table2.sh", "--dataset", "demo", "--epochs", "3", "--only", "RAND", "--out", root
    )

    tables, result = make_tables(root)
    records = {
        name: [json.loads(line) for line in (root / name / "seed0" / "metrics.jsonl").read_text().splitlines()]
        for name in ("RAND", "SSB-BR", "SSB-DBS-BR")
    }
    assert [len(r) for r in records.values()] == [3, 3, 2]
    assert result["stage_epochs"] == [2, 2, 3] and result["unfinished"] == {"SSB-DBS-BR/seed0": 2}
    check_tables(tables, result, {name: expected_row(r, [2, 2, 3]) for name, r in records.items()})
    assert result["table2"]["SSB-BR"]["vl3"] is not None and result["table2"]["SSB-DBS-BR"]["vl3"] is None
    assert result["table4"][-1]["from_vl3"] is not None and result["table4"][-1]["reduction_pct"] is None


@pytest.mark.slow
def test_quality_sh_runs_the_sweep_with_both_learning_rate_rules_and_tables_them(tmp_path, demo_corpus):
    """scripts/reproduction/quality.sh demo at a tiny size, its first sweep narrowed to RAND (--only; the five
    experiments by default, as --help says; table2.sh's own test runs a sweep of three): SSB-DBS-BR again
    with each lr_batch_scaling rule at the paper's constant rate, and both losses' tables with the variants."""
    usage = " ".join(run("scripts/reproduction/quality.sh", "--help").split())
    assert (
        "--only LIST comma-separated experiments of the first sweep (default RAND,SB-BR,SSB-BR,ATS-BR,SSB-DBS-BR)"
        in usage
    )
    extra = f"demo_utterances={DEMO_UTTERANCES},{demo_corpus.hparams},batch_size=8,val_batch_size=8,{TINY}"
    out = run(
        "scripts/reproduction/quality.sh",
        "demo",
        "--epochs",
        "1",
        "--seeds",
        "0",
        "--only",
        "RAND",
        "--out",
        tmp_path / "runs",
        "--tables",
        tmp_path / "docs",
        "--hparams",
        extra,
    )
    assert out.count("training in") == 3
    for rule in ("sqrt", "linear"):
        hp = json.loads((tmp_path / "runs" / f"demo-lr-{rule}" / "SSB-DBS-BR" / "seed0" / "hparams.json").read_text())
        assert (hp["lr_batch_scaling"], hp["learning_rate"], hp["warmup_steps"], hp["dbs"]) == (rule, 0.001, 0, True)
    for loss in ("valid", "padded"):
        result = json.loads((tmp_path / "docs" / f"demo-{loss}" / "tables.json").read_text())
        assert result["val_loss"] == loss
        assert set(result["table2"]) == {"RAND", "SSB-DBS-BR (lr sqrt)", "SSB-DBS-BR (lr linear)"}
        assert all(row["vl3"] is not None for row in result["table2"].values())
        assert (tmp_path / "docs" / f"demo-{loss}" / "fig4_val_loss.png").stat().st_size > 0
    for args, message in ((["speech"], "unknown corpus 'speech'"), (["demo", "--only", "NOPE"], "unknown experiment")):
        bad = run_command("scripts/reproduction/quality.sh", *args, "--out", tmp_path / "bad", env=ENV, expect=None)
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow  # scripts/reproduction/table1.sh end to end: 12-14 s
def test_table1_on_ljspeech_lengths(ljspeech_lengths_tsv, tmp_path):
    out = run("scripts/reproduction/table1.sh", ljspeech_lengths_tsv, tmp_path)
    rows = [line for line in (tmp_path / "table1.md").read_text().splitlines() if line.startswith("| ")][1:]
    assert [row.split("|")[1].strip() for row in rows] == [
        "RAND",
        "SB",
        "SSB",
        "BKT",
        "ATS",
        "RAND-DBS",
        "SB-DBS",
        "SSB-DBS",
    ]
    assert "| RAND | 655 |" in out
    for png in ("fig1_batches", "fig2_sweep", "fig3_batches_dbs"):
        assert (tmp_path / f"{png}.png").stat().st_size > 0


def synthetic_lengths(folder: Path, count: int) -> Path:
    """A lengths TSV of `count` utterances of 20-119 frames and one to four phrases of text."""
    lengths = folder / "lengths.tsv"
    lines = (f"u{i}\t{20 + (i * 37) % 100}\t{'some words here ' * (1 + i % 4)}\n" for i in range(count))
    lengths.write_text("id\tframes\ttext\n" + "".join(lines))
    return lengths


@pytest.mark.slow
def test_bench_epoch_runs_end_to_end(tmp_path):
    lengths = synthetic_lengths(tmp_path, 40)
    out = run(
        sys.executable,
        "-m",
        "scripts.bench.epoch",
        "--lengths",
        lengths,
        "--split",
        "1",
        "--max-batches",
        "1",
        "--warmup",
        "0",
        "--threads",
        "1",
        "--hparams",
        f"n_frames_per_step=4,{TINY}",
        "--json",
        "--out",
        tmp_path / "bench.md",
        "--device",
        "cpu",
    )
    result = json.loads(out)
    assert result["torch"] and result["device"] and result["extrapolated"] and result["utterances"] == 40
    rows = result["strategies"]
    assert list(rows) == ["RAND", "SB-BR", "SSB-BR", "BKT-BR", "ATS-BR", "SSB-DBS-BR", "SSB-DBS-BR-cost"]
    assert rows["SSB-DBS-BR-cost"]["paper_reduction_pct"] is None  # the recipe's default SSB: no paper figure
    for row in rows.values():
        assert row["seconds_per_epoch"] > 0 and row["frames_per_second"] > 0 and row["decoder_steps"] > 0
        assert row["timed_batches"] == 1
    assert rows["RAND"]["reduction_pct"] == 0 and rows["SSB-BR"]["paper_reduction_pct"] == 29.98
    text = (tmp_path / "bench.md").read_text()
    assert "Extrapolated" in text and "torch " + result["torch"] in text and "| SSB-DBS-BR |" in text


@pytest.mark.slow
def test_bench_epoch_times_the_decoder_loop_on_its_static_shapes(tmp_path):
    """--graph-bucket with --cuda-graphs: each strategy's shapes built before timing (on the CPU
    the static buffers run eagerly), the capture time reported."""
    lengths = synthetic_lengths(tmp_path, 40)
    out = run(
        sys.executable,
        "-m",
        "scripts.bench.epoch",
        "--lengths",
        lengths,
        "--split",
        "1",
        "--max-batches",
        "2",
        "--warmup",
        "1",
        "--threads",
        "1",
        "--hparams",
        f"n_frames_per_step=4,{TINY}",
        "--device",
        "cpu",
        "--strategies",
        "RAND,SSB-DBS-BR",
        "--graph-bucket",
        "32",
        "--cuda-graphs",
        "--json",
    )
    result = json.loads(out)
    assert result["graph_bucket"] == 32 and result["cuda_graphs"] and result["capture_seconds"] >= 0
    assert all(row["seconds_per_epoch"] > 0 for row in result["strategies"].values())


def test_docker_image_keeps_the_base_torch():
    """requirements-docker.txt is requirements.txt minus torch, and nothing in it depends on torch."""

    def pins(name):
        return {line for line in (REPO / name).read_text().splitlines() if line.strip() and not line.startswith("#")}

    assert pins("requirements-docker.txt") == {p for p in pins("requirements.txt") if not p.startswith("torch")}
    seen, todo = set(), [p.split("==")[0].lower() for p in pins("requirements-docker.txt")]
    while todo:  # the installed dependency closure (same pins as the image's)
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for req in map(Requirement, importlib.metadata.distribution(name).requires or []):
            if req.marker is None or req.marker.evaluate({"extra": "", "platform_system": "Linux"}):
                todo.append(req.name.lower().replace("_", "-"))
    assert {"numba", "llvmlite", "contourpy"} <= seen and "torch" not in seen
    dockerfile = (REPO / "Dockerfile").read_text()
    base = re.search(
        r"^ARG BASE_IMAGE=pytorch/pytorch:(\d+)\.(\d+)\.\d+-cuda[\d.]+-cudnn\d+-runtime$", dockerfile, re.M
    )
    assert base and (int(base[1]), int(base[2])) >= (2, 11) and "\nFROM ${BASE_IMAGE}\n" in dockerfile
    assert "WORKDIR /workspace" in dockerfile and "-r requirements-docker.txt" in dockerfile
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".venv", "runs", "corpora", ".cache"} <= set(ignored)


def markdown_tables(text: str) -> list[dict[str, list[str]]]:
    """Each Markdown table of `text` as {first cell: the other cells}, header and rule left out."""
    tables, rows = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            rows = None
        elif rows is None:
            rows = {}
            tables.append(rows)
        elif not line.startswith("|---"):
            rows[line.split("|")[1].strip()] = [c.strip() for c in line.split("|")[2:-1]]
    return tables


@pytest.mark.slow
def test_bench_step_runs_every_variant_from_the_same_weights(tmp_path):
    """A synthetic lengths file and a tiny model: one batch through eager, fast, bucketed and graphed
    (static buffers, eager on the CPU, asked for by name: the CPU's default is eager and fast); the
    first losses agree (same weights, same dropout masks), every variant's operations per decoder step
    are printed and positive, and the last line is the ratio."""
    lengths = synthetic_lengths(tmp_path, 60)
    out = run(
        sys.executable,
        "-m",
        "scripts.bench.step",
        "--lengths",
        lengths,
        "--batches",
        "1",
        "--variants",
        "bucketed,graphed",
        "--hparams",
        f"n_frames_per_step=4,{TINY}",
    )
    rows, ops = markdown_tables(out)
    assert list(rows) == list(ops) == ["eager", "fast", "bucketed", "graphed"]
    for forward, backward, total in ([float(c) for c in row] for row in ops.values()):
        assert forward > 0 and backward > 0 and total == pytest.approx(forward + backward, abs=0.11)
    losses = [float(row[3]) for row in rows.values()]
    assert max(losses) - min(losses) <= 1e-5 * abs(losses[0])
    assert all(float(row[4]) < 1e-4 for row in rows.values())  # gradient difference against eager
    assert re.fullmatch(r"fast/eager speed ratio: \d+\.\d\d", out.strip().splitlines()[-1])


def test_bench_step_runs_eager_and_fast_on_the_small_model_by_default_on_the_cpu():
    """On the CPU the default is what fits a laptop (a few minutes, a few GiB): eager and fast on the
    small model; the graph-ready variants only when named; on CUDA every variant on the full model."""
    import torch

    from scripts.bench.step import VARIANTS, argument_parser, chosen_variants

    args = argument_parser().parse_args([])
    assert chosen_variants(args, torch.device("cpu")) == ["eager", "fast"] and args.preset == "small"
    args = argument_parser().parse_args(["--variants", "graphed,bf16", "--preset", "full"])
    assert chosen_variants(args, torch.device("cpu")) == ["eager", "fast", "graphed"] and args.preset == "full"
    args = argument_parser().parse_args([])
    assert chosen_variants(args, torch.device("cuda")) == list(VARIANTS) and args.preset == "full"


def test_bench_step_refuses_an_unknown_variant(capsys):
    from scripts.bench.step import main

    assert main(["--variants", "graphed,fused"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --variants graphed,fused: unknown ['fused']"), err


def test_equal_time_leaves_unfinished_runs_out_until_they_have_trained_that_long():
    from scripts.reproduction.curves import loss_within

    row = {
        "epochs": 4,
        "curve": [
            {"epoch": 2, "loss": 0.9, "minutes": 1.0, "steps": 30},
            {"epoch": 4, "loss": 0.7, "minutes": 2.0, "steps": 60},
        ],
    }
    assert loss_within(row, 1.5, total=4) == (2, 0.9) and loss_within(row, 3.0, total=4) == (4, 0.7)
    assert loss_within(row, 0.5, total=4) is None  # no validation that early
    assert loss_within(row, 1.5, total=8) == (2, 0.9)  # unfinished, but it has trained that long
    assert loss_within(row, 3.0, total=8) is None  # unfinished and not yet 3 minutes in
    assert loss_within(row, 59, total=4, measure="steps") == (2, 0.9)
