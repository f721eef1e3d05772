"""The learning-rate rule of the training step: the paper's constant rate by default, a linear
warm-up, and the optional scaling with the batch size that DBS makes vary."""

import pytest
import torch

import train
from tests.kit import tiny
from training.config import resolve_config
from training.hparams import load_hparams
from training.rundir import read_metrics
from training.step import learning_rate


def config(extra: str):
    # ljspeech: a preset with no warm-up of its own (the demo preset has one)
    return resolve_config(load_hparams(f"dataset=ljspeech,batch_size=16,learning_rate=0.002,{extra}".rstrip(",")))


def test_constant_by_default_whatever_the_batch():
    cfg = config("")
    assert {
        learning_rate(cfg.train, cfg.batching.batch_size, step, b) for step in (0, 5, 10_000) for b in (3, 16, 40)
    } == {0.002}


def test_warm_up_is_linear_then_flat():
    cfg = config("warmup_steps=4")
    assert [learning_rate(cfg.train, cfg.batching.batch_size, step, 16) for step in range(6)] == pytest.approx(
        [0.0005, 0.001, 0.0015, 0.002, 0.002, 0.002]
    )


@pytest.mark.parametrize("rule, exponent", [("sqrt", 0.5), ("linear", 1.0)])
def test_batch_scaling_follows_b_over_b0(rule, exponent):
    cfg = config(f"lr_batch_scaling={rule},warmup_steps=10")
    assert learning_rate(cfg.train, cfg.batching.batch_size, 100, 36) == pytest.approx(
        0.002 * (36 / 16) ** exponent, rel=1e-12
    )
    assert learning_rate(cfg.train, cfg.batching.batch_size, 4, 4) == pytest.approx(
        0.002 * 0.5 * (4 / 16) ** exponent, rel=1e-12
    )


def test_the_run_applies_the_rule_step_by_step(tmp_path, demo_corpus):
    """A warmed-up run ends its first epoch with Adam's rate at the ramp's value for that step."""
    assert train.main(["--hparams", tiny(tmp_path, "epochs=1,warmup_steps=1000,learning_rate=0.01", demo_corpus)]) == 0
    steps = read_metrics(tmp_path / "run")[0]["steps"]
    rate = torch.load(tmp_path / "run" / "checkpoint_last.pt", weights_only=False)["optimizer"]["param_groups"][0]["lr"]
    assert rate == pytest.approx(0.01 * steps / 1000, rel=1e-12)
