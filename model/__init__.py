"""Tacotron2 model, its input batch, its configuration and its loss."""

from .batch import Batch
from .config import Tacotron2Config
from .loss import LossParts, LossTerms, Tacotron2Loss
from .tacotron2 import Tacotron2, Tacotron2Inference, Tacotron2Output

__all__ = [
    "Batch",
    "LossParts",
    "LossTerms",
    "Tacotron2",
    "Tacotron2Config",
    "Tacotron2Inference",
    "Tacotron2Loss",
    "Tacotron2Output",
]
