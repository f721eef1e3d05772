"""Batching strategies for variable-length training (Ge et al., "Speed up training with variable
length inputs by efficient batching strategies"): a torch-free planner, metrics and CLI.

Layers, bottom up (no module imports one above it, so there is no import circle, not even
for type annotations): strategies.py (the strategy table's rows); config.py (BatchingConfig,
validated against the rows); plan.py (GlobalPlan, the plan type, and its statistics) and
sharding.py / grouping.py; the strategies (ordering.py + ordered.py, stream.py, bload.py);
planner.py (each row's planning function, plan_global / plan_epoch); then metrics.py,
analysis.py, cli.py. How to add a strategy: see planner.py's docstring.

The PyTorch batch samplers live in batching.sampler (imported on demand, so this package
needs only numpy and numba).
"""

__version__ = "0.1.0"  # the package version (pyproject.toml reads it from here)

from .config import BatchingConfig
from .lengths import LengthsFileError, read_lengths
from .metrics import pair_repeat, randomness
from .options import OptionError, parse_overrides
from .plan import GlobalPlan, batch_stats, plan_digest
from .planner import plan_epoch, plan_global, strategy_of
from .split import train_split
from .strategies import STRATEGIES, STRATEGY_TABLE, Strategy
from .stream import StreamBucketer, deal_steps, plan_stream, skipped_samples

__all__ = [
    "STRATEGIES",
    "STRATEGY_TABLE",
    "BatchingConfig",
    "GlobalPlan",
    "LengthsFileError",
    "OptionError",
    "Strategy",
    "batch_stats",
    "pair_repeat",
    "parse_overrides",
    "plan_digest",
    "plan_epoch",
    "plan_global",
    "randomness",
    "read_lengths",
    "strategy_of",
    "train_split",
    "StreamBucketer",
    "deal_steps",
    "plan_stream",
    "skipped_samples",
]
