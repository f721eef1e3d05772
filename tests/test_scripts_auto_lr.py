"""scripts/reproduction/auto_lr.py without training: the GPU price of an epoch from its plan figures, the
validation loss read at equal priced time, the rates batch_size=auto would give, and the report, on
metrics written by hand."""

import argparse
import json

import pytest

from scripts.reproduction.auto_lr import at_equal_time, priced_seconds, report, runs


def record(epoch: int, steps: int, frames: int, val: float | None = None) -> dict:
    return {"epoch": epoch, "decoder_steps": steps, "padded_frames": frames} | (
        {} if val is None else {"val_loss": val}
    )


def test_an_epoch_is_priced_at_the_step_cost_fit():
    # 1000 decoder steps and 16,000 utterance-steps (32,000 frames at r = 2)
    assert priced_seconds(record(0, 1000, 32000), 2) == pytest.approx(0.2856 + 16000 * 7.06e-6)


def test_the_loss_is_read_at_the_last_validated_epoch_within_the_budget():
    one = priced_seconds(record(0, 1000, 32000), 2)
    records = [record(k, 1000, 32000, val=10.0 - k) for k in range(5)]
    records[2].pop("val_loss")
    assert at_equal_time(records, 3.5 * one, 2) == (2, pytest.approx(2 * one), 9.0)  # epoch 2 not validated
    assert at_equal_time(records, 4 * one, 2)[0] == 4
    assert at_equal_time(records, 0.5 * one, 2) is None


def test_b0_32_gets_the_rate_batch_size_auto_would_give_and_twice_the_epochs(tmp_path):
    args = argparse.Namespace(seeds="0,1", rules="none,linear", epochs=3, out=tmp_path, hparams="")
    plan = {(rule, seed, b0): (hp, epochs) for rule, seed, b0, _, hp, epochs in runs(args)}
    assert len(plan) == 8
    assert "learning_rate=0.002,lr_batch_scaling=linear" in plan["linear", 1, 32][0] and plan["linear", 1, 32][1] == 6
    assert "learning_rate=0.001,lr_batch_scaling=none" in plan["none", 0, 32][0]
    assert "batch_size=16,learning_rate=0.001" in plan["linear", 0, 16][0] and plan["linear", 0, 16][1] == 3


def test_the_report_compares_at_equal_time(tmp_path):
    args = argparse.Namespace(seeds="0", rules="linear", epochs=2, out=tmp_path, hparams="")
    plan = runs(args)
    for b0, records in (
        (16, [record(0, 1000, 32000, 12.0), record(1, 1000, 32000, 10.0)]),
        (32, [record(k, 500, 32000, 11.0 - k) for k in range(4)]),  # cheaper epochs: 3 of them fit
    ):
        folder = tmp_path / f"linear-b{b0}-seed0"
        folder.mkdir()
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lines = report(plan, 2)
    assert "| linear | 1 | -1.0000 | -1.0000 .. -1.0000 |" in lines
    assert any(line.startswith("| linear | 0 | 10.0000 |") and "| 9.0000 | 3 |" in line for line in lines)
