"""training/auto_batch.py and its config: batch_size=auto resolved (16 on the CPU, a probe against a
simulated memory limit for the GPU's search), the learning rate it scales, its cache, and the run's
stored hparams, which a resume keeps."""

import json
from functools import partial

import numpy as np
import pytest
import torch

import train
import training.auto_batch as auto_batch
from tests.kit import tiny
from training.auto_batch import (
    HostGauge,
    ProbeSetup,
    cache_key,
    fits,
    gpu_b0,
    probe_shapes,
    probe_step,
    probe_table,
    read_cache,
    write_cache,
)
from training.batch_probe import largest_fitting
from training.checkpoint import load_checkpoint
from training.config import resolve_config, with_batch_size
from training.hparams import load_hparams, resume_hparams
from training.rundir import LAST, read_hparams

#: The tiny model on a padded, graphed-on-the-CPU loop (static buffers) and SSB at a given width.
PROBED = "model_preset=tiny,device=cpu,n_frames_per_step=2,fast_decoder=true,graph_bucket=8,cuda_graphs=true,lrf=0.1"


def probe_setup(limit: int, lengths=None) -> ProbeSetup:
    cfg = resolve_config(load_hparams(PROBED + ",batch_size=auto"))
    frames = np.random.default_rng(0).integers(4, 17, 60) if lengths is None else lengths
    return ProbeSetup(
        cfg.train, cfg.model, cfg.batching, frames, frames // 2 + 3, torch.device("cpu"), HostGauge(limit)
    )


def test_auto_stands_at_16_until_resolved():
    """(Bad values: tests/test_user_errors.py.)"""
    cfg = resolve_config(load_hparams("batch_size=auto"))
    assert cfg.auto_batch_size and cfg.batching.batch_size == 16
    cfg = resolve_config(load_hparams("batch_size=24"))
    assert not cfg.auto_batch_size and cfg.batching.batch_size == 24


@pytest.mark.parametrize("scaling, factor", [("none", 1.0), ("sqrt", 2.0), ("linear", 4.0)])
def test_the_learning_rate_given_for_16_follows_lr_batch_scaling(scaling, factor):
    cfg = resolve_config(load_hparams(f"batch_size=auto,learning_rate=0.001,lr_batch_scaling={scaling}"))
    train_cfg, batching, hp = with_batch_size(
        cfg.train, cfg.batching, {"batch_size": "auto", "learning_rate": 0.001}, 64
    )
    assert batching.batch_size == hp["batch_size"] == 64
    assert train_cfg.learning_rate == hp["learning_rate"] == pytest.approx(0.001 * factor)


def test_a_larger_memory_gives_a_larger_b0_whose_step_fits():
    """The GPU's fits() on the CPU: a training step's peak tensor bytes against a simulated limit."""
    setup = probe_setup(10**12)
    shapes = probe_shapes(probe_table(setup, 16))
    assert shapes[0].frames == max(s.frames for s in probe_table(setup, 16).shapes())
    at_16 = max(setup.gauge.peak(partial(probe_step, setup, shape)) for shape in shapes)
    found = {}
    for multiple in (1.3, 3.0):
        limited = probe_setup(int(at_16 * multiple))
        found[multiple] = b0 = largest_fitting(partial(fits, limited), tolerance=0.5, ceiling=64)
        table = probe_table(limited, b0)
        statics = {shape: auto_batch.static_bytes(limited, shape) for shape in table.shapes()}
        for shape in probe_shapes(table):  # its step (its own static buffers included) beside the other shapes'
            used = limited.gauge.peak(partial(probe_step, limited, shape)) + sum(statics.values()) - statics[shape]
            assert used <= 0.9 * limited.gauge.limit, (b0, shape, used)
    assert 16 <= found[1.3] < found[3.0], found


def test_the_cache_answers_a_second_start_and_heals_when_damaged(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(auto_batch, "gpu_identity", lambda device: "simulated GPU|1000")
    probes = []
    monkeypatch.setattr(auto_batch, "probe_b0", lambda setup: probes.append(setup) or 48)
    setup, cache = probe_setup(10**9), tmp_path / "mels" / auto_batch.CACHE_NAME
    assert gpu_b0(setup, cache) == (48, f"probed in 0 s, cached in {cache}")
    assert gpu_b0(setup, cache) == (48, f"cached in {cache}") and len(probes) == 1
    other = probe_setup(10**9, lengths=np.arange(4, 40))
    assert (
        cache_key(other, "simulated GPU|1000")
        != cache_key(setup, "simulated GPU|1000")
        != cache_key(setup, "another GPU|1000")
    )
    for damage in ("{not json", json.dumps({"key": "sixteen"})):
        cache.write_text(damage)
        assert read_cache(cache) == {}
        assert "warning: batch_size=auto cache" in capsys.readouterr().err
        assert gpu_b0(setup, cache)[0] == 48
        assert read_cache(cache) == {cache_key(setup, "simulated GPU|1000"): 48}
    write_cache(cache, {"a": 1})
    assert json.loads(cache.read_text()) == {"a": 1}


def test_check_plans_at_16(tmp_path, capsys, demo_corpus):
    assert train.main(["--check", "--hparams", tiny(tmp_path, "batch_size=auto", demo_corpus)]) == 0
    out = capsys.readouterr().out
    assert "batch_size=auto: B0 = 16 here" in out and "RAND, B0=16:" in out


def test_a_cpu_run_resolves_16_and_stores_it_for_its_resume(tmp_path, capsys, demo_corpus):
    hparams = tiny(tmp_path, "batch_size=auto,lr_batch_scaling=sqrt,stop_after_steps=1", demo_corpus)
    assert train.main(["--hparams", hparams]) == 0
    out = capsys.readouterr().out
    assert "batch_size=auto: B0 = 16, the paper's B0 on the CPU (no probe); learning_rate 0.001 " in out
    assert "(lr_batch_scaling=sqrt, learning_rate 0.001 given for B0 = 16)" in out
    stored = load_checkpoint(tmp_path / "run" / LAST)["hparams"]
    assert stored == read_hparams(tmp_path / "run")
    assert stored["batch_size"] == 16 and stored["learning_rate"] == 0.001
    resumed = resolve_config(resume_hparams(stored, ""))
    assert not resumed.auto_batch_size and resumed.batching.batch_size == 16
