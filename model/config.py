"""Tacotron2 hyper-parameters: NVIDIA's Tacotron2 dimensions as defaults, checked on creation."""

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

# Fields that must be >= 1, fields that may be 0, dropout probabilities in [0, 1).
_POSITIVE = (
    "n_symbols",
    "symbols_embedding_dim",
    "encoder_embedding_dim",
    "encoder_kernel_size",
    "n_mel_channels",
    "n_frames_per_step",
    "attention_rnn_dim",
    "decoder_rnn_dim",
    "prenet_dim",
    "attention_dim",
    "attention_location_n_filters",
    "attention_location_kernel_size",
    "postnet_embedding_dim",
    "postnet_kernel_size",
    "postnet_n_convolutions",
    "max_decoder_steps",
)
_NON_NEGATIVE = ("encoder_n_convolutions",)
_PROBABILITIES = ("encoder_dropout", "p_attention_dropout", "p_decoder_dropout", "prenet_dropout", "postnet_dropout")
#: The switches that run part of the decoder step as Triton kernels (model/ops/support.py says where):
#: fused, or split around cuBLAS products.
FUSED_SWITCHES = ("fused_attention", "fused_lstm", "split_lstm")
#: The LSTM cell's two kernel designs (model/fast_steps.py): at most one of them on.
LSTM_DESIGNS = ("fused_lstm", "split_lstm")
# "Same" padding of a convolution keeps the length only for odd kernels.
_ODD = ("encoder_kernel_size", "attention_location_kernel_size", "postnet_kernel_size")


class ModelConfigError(ValueError):
    """A bad model setting (hparam `model.<field>`); the message names the field and what is allowed.
    The model knows nothing of the recipe's user-error type: training/config.py turns this into it."""


@dataclass(frozen=True)
class Tacotron2Config:
    """Model dimensions. Defaults are NVIDIA's Tacotron2 (the recipe the paper trained)."""

    n_symbols: int
    symbols_embedding_dim: int = 512
    encoder_n_convolutions: int = 3
    encoder_embedding_dim: int = 512
    encoder_kernel_size: int = 5
    encoder_dropout: float = 0.5
    n_mel_channels: int = 80
    n_frames_per_step: int = 1
    attention_rnn_dim: int = 1024
    decoder_rnn_dim: int = 1024
    prenet_dim: int = 256
    attention_dim: int = 128
    attention_location_n_filters: int = 32
    attention_location_kernel_size: int = 31
    postnet_embedding_dim: int = 512
    postnet_kernel_size: int = 5
    postnet_n_convolutions: int = 5
    postnet_dropout: float = 0.5
    p_attention_dropout: float = 0.1
    p_decoder_dropout: float = 0.1
    prenet_dropout: float = 0.5
    max_decoder_steps: int = 1000
    gate_threshold: float = 0.5
    # Teacher-forced decoder of model/fast_decoder.py: same parameters and results, deferred
    # recurrent weight gradients (a training speed switch; inference is the same either way).
    fast_decoder: bool = False
    # Keep only each decoder step's attention inputs and recompute its energy chain in the backward
    # (model/attention.py): about 58 % less activation memory per utterance-frame at LJSpeech's text
    # lengths, for one more energy chain per step; the same outputs and gradients. Memory, not speed:
    # off until a GPU has measured what it costs and how much larger a batch it lets fit.
    recompute_attention: bool = False
    # Each decoder step's attention (location features to context, and the cumulative weights) as one
    # Triton kernel forward and one backward that recomputes the chain (model/ops/attention_step.py):
    # about 20 fewer launches a step, recompute_attention's memory. Needs fast_decoder and a CUDA GPU
    # (on the CPU only Triton's interpreter, TRITON_INTERPRET=1, runs it: tests). Off until a GPU
    # has measured it faster.
    fused_attention: bool = False
    # Each decoder step's two LSTM cells (the inputs' row, the product, the cell update, the dropout
    # mask) as one Triton kernel forward and one backward each (model/ops/lstm_cell.py). The same
    # conditions as fused_attention; off until a GPU has measured it faster.
    fused_lstm: bool = False
    # The rival of fused_lstm: each LSTM cell's product on cuBLAS (one GEMM a step, as the fast loop's)
    # with everything between two products as one Triton kernel forward and one backward
    # (model/ops/lstm_split.py). The same conditions; it excludes fused_lstm; off until a GPU has
    # timed it against fused_lstm.
    split_lstm: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise ModelConfigError(f"Tacotron2Config.{f.name} must be an int, got {value!r}")
            if f.type is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ModelConfigError(f"Tacotron2Config.{f.name} must be a number, got {value!r}")
            if f.type is bool and not isinstance(value, bool):
                raise ModelConfigError(f"Tacotron2Config.{f.name} must be a bool, got {value!r}")
        for name in _POSITIVE:
            _require(self, name, getattr(self, name) >= 1, "must be >= 1")
        for name in _NON_NEGATIVE:
            _require(self, name, getattr(self, name) >= 0, "must be >= 0")
        for name in _PROBABILITIES:
            _require(self, name, 0.0 <= getattr(self, name) < 1.0, "must be in [0, 1)")
        for name in _ODD:
            _require(self, name, getattr(self, name) % 2 == 1, "must be odd (same-length convolution)")
        _require(
            self,
            "encoder_embedding_dim",
            self.encoder_embedding_dim % 2 == 0,
            "must be even (the BiLSTM gives half to each direction)",
        )
        _require(self, "gate_threshold", 0.0 < self.gate_threshold < 1.0, "must be in (0, 1)")
        for name in FUSED_SWITCHES:
            _require(
                self,
                name,
                self.fast_decoder or not getattr(self, name),
                "needs fast_decoder=true (fused, the fast loop)",
            )
        fused, split = LSTM_DESIGNS
        _require(
            self,
            split,
            not (getattr(self, fused) and getattr(self, split)),
            f"and model.{fused}=true are two designs of the same LSTM cell: set one of them to false",
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Tacotron2Config":
        """Build from a mapping (hparams), naming any unknown key and the allowed ones."""
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(allowed))
        if unknown:
            raise ModelConfigError(f"unknown Tacotron2Config key(s) {unknown}; allowed: {', '.join(allowed)}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)


def _require(cfg: Tacotron2Config, name: str, ok: bool, message: str) -> None:
    if not ok:
        raise ModelConfigError(f"Tacotron2Config.{name}={getattr(cfg, name)!r} {message}")
