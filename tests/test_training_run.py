"""train.py end to end on tiny data: metrics, checkpoints, exact resume, bad input, NaN handling."""

import dataclasses
import json
import math
import re
import shutil
import signal

import pytest
import torch

import train
import training.step
from tests.kit import TINY_MODEL, check_demo_learns, tiny
from training.checkpoint import load_checkpoint
from training.config import resolve_config
from training.hparams import load_hparams
from training.rundir import LAST, read_metrics, write_hparams


def test_run_writes_metrics_checkpoint_and_figures(tmp_path, demo_corpus):
    handler_before = signal.getsignal(signal.SIGINT)
    assert train.main(["--hparams", tiny(tmp_path, "epochs=2,batching=ssb,dbs=true,br=true", demo_corpus)]) == 0
    assert signal.getsignal(signal.SIGINT) is handler_before  # the stop handler does not outlive the run
    run = tmp_path / "run"
    records = read_metrics(run)
    assert [r["epoch"] for r in records] == [0, 1]
    for record in records:
        for key in (
            "train_seconds",
            "n_batches",
            "zpr",
            "abl",
            "train_loss",
            "train_loss_valid",
            "train_loss_padded",
            "val_loss",
            "val_loss_valid",
            "val_loss_padded",
        ):
            assert key in record, key
        assert record["train_seconds"] > 0 and 0 <= record["zpr"] < 100
        assert record["train_loss"] == record["train_loss_valid"]  # loss_norm=valid by default
    assert (run / "alignment.png").stat().st_size > 0 and (run / "mel.png").stat().st_size > 0
    assert any((run / "tensorboard").iterdir())
    ckpt = load_checkpoint(run / LAST)
    assert ckpt["progress"]["epoch"] == 2 and ckpt["hparams"]["batching"] == "ssb"
    assert json.loads((run / "hparams.json").read_text())["dbs"] is True


def test_interrupted_and_resumed_run_matches_an_uninterrupted_one(tmp_path, demo_corpus):
    """Stop inside epoch 1, resume: per-epoch losses equal those of a run that never stopped."""
    straight = tmp_path / "straight"
    assert (
        train.main(["--hparams", tiny(tmp_path, f"epochs=3,n_frames_per_step=4,output_dir={straight}", demo_corpus)])
        == 0
    )
    steps_epoch0 = read_metrics(straight)[0]["steps"]

    stopped = tmp_path / "stopped"
    hp = tiny(
        tmp_path, f"epochs=3,n_frames_per_step=4,output_dir={stopped},stop_after_steps={steps_epoch0 + 2}", demo_corpus
    )
    assert train.main(["--hparams", hp]) == 0
    assert len(read_metrics(stopped)) == 1  # stopped inside epoch 1
    assert load_checkpoint(stopped / LAST)["progress"]["step_in_epoch"] == 2
    assert train.main(["--resume", str(stopped), "--hparams", "stop_after_steps=0"]) == 0

    a, b = read_metrics(straight), read_metrics(stopped)
    assert [r["epoch"] for r in b] == [0, 1, 2]
    for ra, rb in zip(a, b):
        for key in ("train_loss_valid", "train_loss_padded", "val_loss_valid", "val_loss_padded", "n_batches", "zpr"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-6, abs=1e-7), (ra["epoch"], key)


def test_resume_refuses_to_change_the_batching(tmp_path, capsys, demo_corpus):
    assert train.main(["--hparams", tiny(tmp_path, "epochs=1", demo_corpus)]) == 0
    assert train.main(["--resume", str(tmp_path / "run"), "--hparams", "batching=sb"]) == 2
    assert "'batching' cannot change in a resumed run" in capsys.readouterr().err


def test_a_new_run_never_overwrites_an_old_one_by_accident(tmp_path, capsys, demo_corpus):
    assert train.main(["--hparams", tiny(tmp_path, "epochs=1", demo_corpus)]) == 0
    assert train.main(["--hparams", tiny(tmp_path, "epochs=1", demo_corpus)]) == 2
    assert "already holds a run. Continue it with --resume" in capsys.readouterr().err
    assert train.main(["--hparams", tiny(tmp_path, "epochs=1,overwrite=true", demo_corpus)]) == 0


def test_a_bad_value_is_reported_before_the_run_directory_is_judged(tmp_path, capsys, demo_corpus):
    """A typo into an output_dir that holds a run names the typo, not `overwrite`."""
    assert train.main(["--hparams", tiny(tmp_path, "epochs=1", demo_corpus)]) == 0
    capsys.readouterr()
    assert train.main(["--hparams", tiny(tmp_path, "epochs=1,batching=sorted", demo_corpus)]) == 2
    err = capsys.readouterr().err
    assert "'batching': 'sorted' is not one of" in err and "already holds a run" not in err


def test_bad_hparams_exit_with_a_clear_message(tmp_path, capsys, demo_corpus):
    assert train.main(["--hparams", tiny(tmp_path, "batching=sorted", demo_corpus)]) == 2
    assert "'batching': 'sorted' is not one of rand, sb, ssb, bkt, ats" in capsys.readouterr().err
    assert train.main(["--resume", str(tmp_path / "nowhere")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    for bad in ("capacity=abc", "capacity=0", "batching=stream,max_length=1.5"):
        assert train.main(["--hparams", tiny(tmp_path, bad)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: hparam '") and "or null" in err and err.count("\n") == 1, err


def test_a_run_that_stored_zero_for_unset_options_resumes(tmp_path, demo_corpus):
    """Runs written by older versions stored 0 for unset capacity, max_length and block_length (now
    null; a new run's 0 is an error): --resume reads that 0 as null and records null."""
    run = tmp_path / "run"
    assert train.main(["--hparams", tiny(tmp_path, "epochs=2,stop_after_steps=2", demo_corpus)]) == 0
    ckpt = load_checkpoint(run / LAST)
    legacy = ckpt["hparams"] | {"capacity": 0, "max_length": 0, "block_length": 0}
    torch.save(ckpt | {"hparams": legacy}, run / LAST)
    write_hparams(run, legacy)
    assert train.main(["--resume", str(run), "--hparams", "stop_after_steps=0"]) == 0
    assert [r["epoch"] for r in read_metrics(run)] == [0, 1]
    assert json.loads((run / "hparams.json").read_text())["capacity"] is None


def test_a_checkpoint_with_the_unread_config_entry_resumes_alike(tmp_path, demo_corpus):
    """Checkpoints written by older versions also held "config" (the RunConfig as a dict), which no
    resume read; new ones leave it out. An old one resumes mid-epoch exactly as a new one does."""
    new, old = tmp_path / "new", tmp_path / "old"
    assert train.main(["--hparams", tiny(tmp_path, f"epochs=2,stop_after_steps=2,output_dir={new}", demo_corpus)]) == 0
    shutil.copytree(new, old)
    ckpt = load_checkpoint(old / LAST)
    assert "config" not in ckpt and ckpt["sampler"] is not None  # written mid-epoch, without the entry
    torch.save(ckpt | {"config": dataclasses.asdict(resolve_config(ckpt["hparams"]))}, old / LAST)
    for run in (new, old):
        assert train.main(["--resume", str(run), "--hparams", "stop_after_steps=0"]) == 0
    losses = [
        [{k: r[k] for k in ("train_loss_valid", "val_loss_valid")} for r in read_metrics(run)] for run in (new, old)
    ]
    assert len(losses[0]) == 2 and losses[0] == losses[1]


class NaNLoss(training.step.Tacotron2Loss):
    """The real loss, made NaN on the calls `poisoned` picks (call numbers from 0)."""

    poisoned = staticmethod(lambda call: True)
    calls = 0

    def __call__(self, *args, **kwargs):
        terms = super().__call__(*args, **kwargs)
        NaNLoss.calls += 1
        return dataclasses.replace(terms, loss=terms.loss * float("nan")) if self.poisoned(NaNLoss.calls - 1) else terms


def test_non_finite_losses_skip_steps_then_stop_keeping_the_checkpoint(tmp_path, monkeypatch, capsys, demo_corpus):
    assert train.main(["--hparams", tiny(tmp_path, "epochs=1", demo_corpus)]) == 0
    before = load_checkpoint(tmp_path / "run" / LAST)["model"]

    monkeypatch.setattr(training.step, "Tacotron2Loss", NaNLoss)
    capsys.readouterr()
    assert train.main(["--resume", str(tmp_path / "run"), "--hparams", "epochs=2,max_bad_steps=3"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: 3 non-finite steps in a row at epoch 1") and str(tmp_path / "run" / LAST) in err
    after = load_checkpoint(tmp_path / "run" / LAST)["model"]
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_an_epoch_with_skipped_steps_prints_them_and_the_loss_of_the_others(tmp_path, monkeypatch, capsys, demo_corpus):
    """Every third step NaN: the epoch line counts them, and its loss is the mean over the steps that ran."""
    monkeypatch.setattr(NaNLoss, "poisoned", staticmethod(lambda call: call % 3 == 1))
    monkeypatch.setattr(NaNLoss, "calls", 0)
    monkeypatch.setattr(training.step, "Tacotron2Loss", NaNLoss)
    assert train.main(["--hparams", tiny(tmp_path, "epochs=1,validate_every=5", demo_corpus)]) == 0
    record = read_metrics(tmp_path / "run")[0]
    skipped = sum(1 for call in range(record["steps"]) if call % 3 == 1)
    assert record["skipped_steps"] == skipped > 0 and 0 < record["train_loss"] < math.inf
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("epoch    0")][0]
    assert f"| train {record['train_loss']:.4f} ({skipped} of {record['steps']} steps skipped: non-finite)" in line


def test_an_epoch_whose_every_step_was_skipped_stops_the_run(tmp_path, monkeypatch, capsys, demo_corpus):
    monkeypatch.setattr(training.step, "Tacotron2Loss", NaNLoss)
    assert train.main(["--hparams", tiny(tmp_path, "epochs=2,max_bad_steps=1000", demo_corpus)]) == 1
    captured = capsys.readouterr()
    assert "train 0.0000" not in captured.out and "Traceback" not in captured.err
    assert re.match(
        r"error: every one of the \d+ steps of epoch 0 was skipped for a non-finite loss.* No checkpoint "
        r"was written yet",
        captured.err,
    ), captured.err
    assert read_metrics(tmp_path / "run") == [] and not (tmp_path / "run" / LAST).exists()


@pytest.mark.slow
def test_demo_learns_at_reduced_size(tmp_path):
    check_demo_learns(tmp_path)


@pytest.mark.slow
def test_overfits_real_ljspeech_clips(ljspeech_mini, tmp_path):
    """Real speech end to end: LJSpeech preparation -> filelist -> mels -> training; the 8 shortest
    clips are learned by heart, so the training loss must fall far. (Validation runs on the next two
    clips: the data check refuses a validation set that overlaps the training set.)"""
    from data.corpora.ljspeech import prepare_ljspeech
    from data.filelist import read_filelist, write_filelist

    prepared = prepare_ljspeech(ljspeech_mini, tmp_path / "filelists", seed=0, val_fraction=0.0, progress=False)
    shortest = sorted(read_filelist(prepared.train_path), key=lambda u: u.frames)[:10]
    write_filelist(tmp_path / "eight.txt", shortest[:8])
    write_filelist(tmp_path / "two.txt", shortest[8:])
    hp = (
        f"dataset=filelist,train_filelist={tmp_path / 'eight.txt'},val_filelist={tmp_path / 'two.txt'},"
        f"mel_cache_dir={tmp_path / 'mels'},output_dir={tmp_path / 'run'},progress=false,epochs=16,"
        f"batch_size=4,val_batch_size=8,validate_every=16,n_frames_per_step=4,learning_rate=0.002,"
        f"{TINY_MODEL}"
    )
    assert train.main(["--hparams", hp]) == 0
    records = read_metrics(tmp_path / "run")
    assert records[-1]["train_loss_valid"] < 0.35 * records[0]["train_loss_valid"]
    assert 0 < records[-1]["val_loss_valid"] < records[0]["train_loss_valid"]


def test_check_reports_the_plan_and_writes_no_run(tmp_path, capsys, demo_corpus):
    assert train.main(["--check", "--hparams", tiny(tmp_path, "batching=ssb,dbs=true,br=true", demo_corpus)]) == 0
    out = capsys.readouterr().out
    for expected in (
        "data check passed",
        "train.txt: 32 utterances",
        "batches per epoch, ZPR",
        "decoder steps per epoch",
        "largest batch",
        "expected per-epoch time reduction against RAND",
    ):
        assert expected in out, expected
    assert not (tmp_path / "run").exists()


def test_bad_data_is_refused_before_the_first_step_with_every_problem(tmp_path, capsys, demo_corpus):
    from data.filelist import read_filelist, write_filelist

    assert train.main(["--check", "--hparams", tiny(tmp_path, corpus=demo_corpus)]) == 0
    utts = read_filelist(demo_corpus.demo_dir / "train.txt")
    bad = [utts[0], dataclasses.replace(utts[1], frames=utts[1].frames + 1), dataclasses.replace(utts[2], text="{")]
    write_filelist(tmp_path / "train.txt", bad)
    write_filelist(tmp_path / "val.txt", [utts[0]] + read_filelist(demo_corpus.demo_dir / "val.txt")[:2])
    lists = f"dataset=filelist,train_filelist={tmp_path / 'train.txt'},val_filelist={tmp_path / 'val.txt'}"
    hp = tiny(tmp_path, lists, demo_corpus)
    capsys.readouterr()
    assert train.main(["--hparams", hp]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 3 problem(s) in the data:") and "Traceback" not in err
    assert f"{tmp_path / 'train.txt'}:2: frames field {utts[1].frames + 1} does not match" in err
    assert f"{tmp_path / 'train.txt'}:3: " in err and "'{'" in err
    assert f"{tmp_path / 'val.txt'}:1: train and val overlap" in err
    assert not (tmp_path / "run").exists()


def test_resuming_a_finished_run_says_there_is_nothing_left_to_do(tmp_path, capsys):
    """A run that trained all its epochs: --resume says so and exits 0 without building the run; it
    only rewrites metrics.jsonl from the checkpoint's records (a kill after the last checkpoint can
    leave it an epoch short: tests/test_training_checkpoint.py) and leaves no lock behind."""
    run = tmp_path / "finished"
    run.mkdir()
    hp = load_hparams(tiny(tmp_path, "epochs=2"))
    progress = {"epoch": 2, "step_in_epoch": 0, "global_step": 16}
    torch.save({"model": {}, "optimizer": {}, "scaler": {}, "hparams": hp, "progress": progress}, run / LAST)
    assert train.main(["--resume", str(run)]) == 0
    assert f"{run} has finished all 2 epochs: nothing left to do" in capsys.readouterr().out
    assert sorted(p.name for p in run.iterdir()) == [LAST, "metrics.jsonl"] and read_metrics(run) == []
