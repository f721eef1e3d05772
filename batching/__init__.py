"""Batching strategies for variable-length training (Ge et al., "Speed up training with variable
length inputs by efficient batching strategies"): a torch-free planner, metrics and CLI.

The PyTorch batch sampler lives in batching.sampler (imported on demand, so this package
needs only numpy and numba).
"""
from .config import STRATEGIES, BatchingConfig
from .lengths import LengthsFileError, read_lengths
from .metrics import batch_stats, pair_repeat, randomness
from .planner import GlobalPlan, plan_digest, plan_epoch, plan_global
from .split import train_split
from .stream import StreamBucketer, deal_steps, plan_stream, skipped_samples

__all__ = [
    "STRATEGIES", "BatchingConfig", "GlobalPlan", "LengthsFileError", "batch_stats", "pair_repeat",
    "plan_digest", "plan_epoch", "plan_global", "randomness", "read_lengths", "train_split",
]
__all__ += ["StreamBucketer", "deal_steps", "plan_stream", "skipped_samples"]
