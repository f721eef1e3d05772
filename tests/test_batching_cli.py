"""python -m batching: Table 1 on the real LJSpeech lengths, the other commands, and clean errors."""

import json
import re
import sys
from pathlib import Path

import pytest

from batching.cli import main
from tests.kit import run_command

ACCEPTANCE = {  # the paper's Table 1: ZPR within 0.6 points, ABL within 1 %
    "RAND": (32.02, 773.82),
    "SB": (0.16, 526.43),
    "SSB": (6.22, 556.22),
    "BKT": (6.10, 553.40),
    "ATS": (6.08, 552.48),
    "SB-DBS": (0.47, 527.15),
    "SSB-DBS": (6.62, 557.68),
}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_table1_reproduces_the_paper(capsys, ljspeech_lengths_tsv):
    code, out, _ = run(capsys, "table1", "--lengths", str(ljspeech_lengths_tsv), "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 0 and list(rows) == ["RAND", "SB", "SSB", "BKT", "ATS", "RAND-DBS", "SB-DBS", "SSB-DBS"]
    for name, (zpr, abl) in ACCEPTANCE.items():
        assert abs(rows[name]["zpr"] - zpr) <= 0.6, name
        assert abs(rows[name]["abl"] - abl) <= 0.01 * abl, name
    assert all(rows[n]["n_batches"] == 655 for n in ("RAND", "SB", "SSB", "BKT", "ATS"))
    for name, paper in (("RAND-DBS", 606), ("SB-DBS", 419), ("SSB-DBS", 449)):
        assert abs(rows[name]["n_batches"] - paper) <= 0.07 * paper, name


def test_stats_sweep_calibrate_plot(capsys, tmp_path):
    rows = "".join(f"w{i}.wav|text|{20 + (i * 37) % 700}\n" for i in range(400))
    lengths = tmp_path / "list.txt"
    lengths.write_text(rows)
    code, out, _ = run(
        capsys, "stats", "--lengths", str(lengths), "--hparams", "batching=ssb,dbs=true,br=true", "--json"
    )
    stats = json.loads(out)
    assert code == 0 and stats["config"]["dbs"] and stats["n_samples"] == 400 and 0 <= stats["pair_repeat"] <= 1
    code, out, _ = run(capsys, "sweep", "--lengths", str(lengths), "--out", str(tmp_path))
    assert code == 0 and (tmp_path / "sweep.png").stat().st_size > 0 and "| lrf |" in out
    assert (tmp_path / "tradeoff.png").stat().st_size > 0 and "| bucket_interval |" in out and "| rand | - |" in out
    code, out, _ = run(
        capsys, "calibrate", "--lengths", str(lengths), "--target-zpr", "15", "--json", "--defaults", "none"
    )
    best = json.loads(out)
    assert code == 0 and best["bkt"]["zpr"] <= 15 and best["ats"]["n_bins"] >= 1
    assert best["ssb"]["zpr"] <= 15 and best["ssb"]["lrf"] > 0 and best["stream"]["bucket_interval"] >= 1
    code, out, _ = run(capsys, "plot", "--lengths", str(lengths), "--samples", "48", "--out", str(tmp_path))
    assert code == 0 and (tmp_path / "batches.png").stat().st_size > 0


def test_stats_resolves_a_target_before_planning(capsys, tmp_path):
    lengths = tmp_path / "list.txt"
    lengths.write_text("".join(f"w{i}.wav|text|{20 + (i * 37) % 700}\n" for i in range(400)))
    code, out, err = run(
        capsys,
        "stats",
        "--lengths",
        str(lengths),
        "--split",
        "1",
        "--json",
        "--hparams",
        "batching=ssb,dbs=true,ssb_key=cost,target_zpr=15",
    )
    stats = json.loads(out)
    assert code == 0 and stats["zpr"] <= 15 and stats["config"]["lrf"] not in (None, 0.1)
    assert f"lrf={stats['config']['lrf']} calibrated to target_zpr=15.0" in err


def test_calibrate_finds_the_ssb_lrf_of_a_target_zpr_on_ljspeech(capsys, ljspeech_lengths_tsv):
    """The calibration's promise: target 4 % gives an lrf whose ZPR (checked with `stats`) is within 0.5 points."""
    code, out, _ = run(
        capsys,
        "calibrate",
        "--lengths",
        str(ljspeech_lengths_tsv),
        "--target-zpr",
        "4",
        "--hparams",
        "batching=ssb",
        "--json",
    )
    lrf = json.loads(out)["ssb"]["lrf"]
    code_stats, out, _ = run(
        capsys, "stats", "--lengths", str(ljspeech_lengths_tsv), "--hparams", f"batching=ssb,lrf={lrf}", "--json"
    )
    assert code == code_stats == 0 and 0 < lrf < 1 and abs(json.loads(out)["zpr"] - 4) <= 0.5


@pytest.mark.parametrize(
    "text, hparams, message",
    [
        ("a|t|10\nb|t|x\n", "", r"^error: .*list\.txt:2: frames 'x' is not an integer\n$"),
        ("a|t|10\n", "batching=fast", r"^error: BatchingConfig\.batching='fast' is invalid: expected one of .*\n$"),
        ("a|t|10\n", "capacity=100,dbs=false", r"^error: capacity=100 is a token budget .* add dbs=true.*\n$"),
    ],
)
def test_errors_are_one_line_and_exit_2(capsys, tmp_path, text, hparams, message):
    path = tmp_path / "list.txt"
    path.write_text(text)
    code, out, err = run(capsys, "stats", "--lengths", str(path), "--hparams", hparams)
    assert code == 2 and out == ""
    assert __import__("re").match(message, err), err


def test_module_entry_point_and_no_torch_import(tmp_path):
    path = tmp_path / "list.txt"
    path.write_text("a|t|10\nb|t|-1\n")
    proc = run_command(sys.executable, "-m", "batching", "stats", "--lengths", path, expect=None)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    probe = "import sys, batching, batching.cli; assert 'torch' not in sys.modules"
    run_command(sys.executable, "-c", probe)


def test_plot_refuses_bload_with_a_reason(tmp_path, capsys):
    lengths = tmp_path / "l.txt"
    lengths.write_text("".join(f"a.wav|t|{n}\n" for n in (10, 20, 30, 40)))
    assert main(["plot", "--lengths", str(lengths), "--strategies", "bload", "--out", str(tmp_path)]) == 2
    assert "bload's block plan is not drawn" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["calibrate", "sweep", "plot"])
def test_commands_that_switch_strategies_drop_the_options_of_the_given_one(capsys, tmp_path, command):
    """`batching=stream,max_length=800` owns max_length; calibrate, sweep and plot compare other
    strategies, which take the rest of the settings without it: a result, not an error."""
    lengths = tmp_path / "list.txt"
    lengths.write_text("".join(f"w{i}.wav|text|{20 + (i * 37) % 900}\n" for i in range(300)))
    extra = [] if command == "calibrate" else ["--out", str(tmp_path)]
    code, out, err = run(
        capsys, command, "--lengths", str(lengths), "--hparams", "batching=stream,max_length=800", "--json", *extra
    )
    assert code == 0 and [line.split(":")[0] for line in err.splitlines()] == ["lengths", "defaults"], err
    expected = {
        "calibrate": {"target_zpr", "bkt", "ats", "ssb", "stream"},
        "sweep": {"png", "curves", "points", "tradeoff_png"},
        "plot": {"png", "panels"},
    }
    result = json.loads(out)
    assert set(result) == expected[command]
    assert command == "calibrate" or Path(result["png"]).stat().st_size > 0


@pytest.mark.parametrize(
    "hparams", ["batching=ssb,dbs=true,br=true", "batching=bkt,bucket_size=8,dbs=false", "target_zpr=0.01"]
)
def test_the_cli_plans_the_epoch_train_py_check_plans_from_the_same_hparams(capsys, tmp_path, demo_corpus, hparams):
    """One batching truth: hparams.yaml's defaults and the dataset's preset (the demo's two frames a
    decoder step) under the same --hparams string, so the same ZPR and decoder steps on the training filelist;
    a target out of reach plans SSB at lrf=0, and both say it is the same batches every epoch."""
    import re

    import train
    from tests.kit import tiny

    hp = tiny(tmp_path, hparams, demo_corpus)
    assert train.main(["--check", "--hparams", hp]) == 0
    checked = capsys.readouterr().out
    zpr = re.search(r"batches per epoch, ZPR ([\d.]+)%", checked).group(1)
    steps = re.search(r"decoder steps per epoch: (\d+)", checked).group(1)
    code, out, err = run(
        capsys, "stats", "--lengths", str(demo_corpus.demo_dir / "train.txt"), "--hparams", hp, "--json"
    )
    stats = json.loads(out)
    assert (
        code == 0
        and f"{stats['zpr']:.2f}" == zpr
        and stats["decoder_steps"] == int(steps)
        and stats["config"]["n_frames_per_step"] == 2
    )
    assert f"lengths: all {stats['n_samples']} of " in err and "dataset=demo's preset" in err
    same_batches = "warning: at lrf=0 SSB is a plain sort: every epoch holds the same batches"
    assert (same_batches in checked) == (same_batches in err) == (hparams == "target_zpr=0.01")


def test_every_command_says_its_split_and_stats_prints_a_table(capsys, tmp_path):
    lengths = tmp_path / "list.txt"
    lengths.write_text("".join(f"w{i}.wav|text|{20 + (i * 37) % 700}\n" for i in range(50)))
    code, out, err = run(capsys, "stats", "--lengths", str(lengths), "--hparams", "batching=ssb,lrf=0.1")
    assert code == 0 and f"lengths: all 50 of {lengths} (--split 1.0)" in err
    assert "| figure | value |" in out and re.search(r"^\| zpr \| \d+\.\d\d \|$", out, re.M) and "{" not in out
    code, out, err = run(capsys, "calibrate", "--lengths", str(lengths), "--target-zpr", "20")
    assert code == 0 and f"lengths: 40 of 50 in {lengths}, the training part of the seeded split (--split 0.8" in err


@pytest.mark.parametrize(
    "hparams, warning",
    [
        ("batching=bkt", "bucket_size=1024 >= the 32 lengths: one bucket, shuffled whole, so bkt plans as rand does"),
        (
            "batching=ats",
            "n_bins=58 >= the 32 lengths: bins of at most one, nothing to sort, so ats plans as rand does",
        ),
        ("batching=ssb,lrf=0", "at lrf=0 SSB is a plain sort: every epoch holds the same batches"),
        (
            "batching=ssb,target_zpr=0.01",
            "out of reach on these lengths: ssb_key=cost plans at the nearest width, lrf=0",
        ),
    ],
)
def test_a_setting_that_makes_its_strategy_degenerate_is_a_warning(capsys, tmp_path, hparams, warning):
    lengths = tmp_path / "list.txt"
    lengths.write_text("".join(f"w{i}.wav|text|{20 + (i * 37) % 700}\n" for i in range(32)))
    code, _, err = run(capsys, "stats", "--lengths", str(lengths), "--hparams", hparams)
    assert code == 0 and warning in err and "warning: " in err
    assert run(capsys, "stats", "--lengths", str(lengths), "--hparams", "batching=ssb,lrf=0.1")[2].count("warning") == 0


@pytest.mark.parametrize(
    "hparams",
    [
        "",
        "batching=ssb,lrf=0.2",
        "batching=ssb,ssb_key=length",
        "batching=ssb,ssb_key=null",
        "batching=ssb,target_zpr=null",
        "batching=ssb,target_pair_repeat=0.1",
        "batching=bkt,bucket_size=64,dbs=false",
        "batching=stream,max_length=800",
        "dataset=ljspeech,batching=bload",
        "dataset=espeak,batching=ats,n_bins=4,seed=3",
        "dataset=filelist,train_filelist=t.txt,val_filelist=v.txt,batching=sb,dbs=true,capacity=3000,n_frames_per_step=3",
    ],
)
def test_the_cli_resolves_hparams_to_the_batching_config_the_recipe_resolves(hparams):
    """batching/recipe.py reads hparams.yaml itself (batching imports nothing of training): the config
    it gives equals training's for the same string, frames per decoder step included."""
    import dataclasses

    from batching.recipe import recipe_batching
    from training.config import resolve_config
    from training.hparams import load_hparams

    hp = load_hparams(hparams)
    recipe = resolve_config(hp).batching
    config, _ = recipe_batching(hparams)
    assert config == dataclasses.replace(recipe, n_frames_per_step=hp["n_frames_per_step"])


def test_the_cli_refuses_what_the_recipe_refuses(capsys, tmp_path):
    lengths = tmp_path / "list.txt"
    lengths.write_text("a|t|10\n")
    for hparams, message in (
        ("batching=ssb,lrf=0.2,target_zpr=5", "hparams 'lrf' and 'target_zpr' both set SSB's noise width"),
        ("epoch=3", "unknown hparam(s) epoch"),
        ("dataset=mine", "hparam 'dataset': 'mine' is not one of demo"),
    ):
        code, out, err = run(capsys, "stats", "--lengths", str(lengths), "--hparams", hparams)
        assert code == 2 and out == "" and err.startswith(f"error: {message}") and err.count("\n") == 1, err
