"""Tacotron2Config: NVIDIA defaults, clear errors, from_dict rejecting unknown keys by name."""

import pytest

from model import Tacotron2Config
from model.config import ModelConfigError


def test_defaults_are_nvidia_tacotron2():
    cfg = Tacotron2Config(n_symbols=148)
    assert (cfg.symbols_embedding_dim, cfg.encoder_embedding_dim, cfg.encoder_n_convolutions) == (512, 512, 3)
    assert (cfg.attention_rnn_dim, cfg.decoder_rnn_dim, cfg.prenet_dim) == (1024, 1024, 256)
    assert cfg.attention_dim == 128
    assert (cfg.attention_location_n_filters, cfg.attention_location_kernel_size) == (32, 31)
    assert (cfg.postnet_embedding_dim, cfg.postnet_kernel_size, cfg.postnet_n_convolutions) == (512, 5, 5)
    assert (cfg.n_mel_channels, cfg.n_frames_per_step, cfg.max_decoder_steps) == (80, 1, 1000)
    assert (cfg.p_attention_dropout, cfg.p_decoder_dropout, cfg.prenet_dropout) == (0.1, 0.1, 0.5)
    assert cfg.gate_threshold == 0.5


def test_from_dict_round_trip_and_unknown_keys():
    cfg = Tacotron2Config.from_dict({"n_symbols": 40, "n_frames_per_step": 2, "prenet_dim": 64})
    assert Tacotron2Config.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match=r"\['atention_dim'\].*allowed: n_symbols"):
        Tacotron2Config.from_dict({"n_symbols": 40, "atention_dim": 64})


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("n_frames_per_step", 0, "n_frames_per_step=0 must be >= 1"),
        ("prenet_dropout", 1.0, "prenet_dropout=1.0 must be in"),
        ("attention_location_kernel_size", 30, "must be odd"),
        ("encoder_embedding_dim", 129, "must be even"),
        ("gate_threshold", 1.0, "gate_threshold=1.0 must be in"),
        ("encoder_n_convolutions", -1, "must be >= 0"),
    ],
)
def test_bad_values_are_named(field, value, message):
    with pytest.raises(ValueError, match=message):
        Tacotron2Config(n_symbols=10, **{field: value})


@pytest.mark.parametrize("field, value", [("prenet_dim", 64.0), ("n_symbols", True), ("p_decoder_dropout", "0.1")])
def test_wrong_types_are_named(field, value):
    kwargs = {"n_symbols": 10, field: value}
    with pytest.raises(ModelConfigError, match=field):
        Tacotron2Config(**kwargs)
