"""What a PlanCutSampler batch may hold and how each example is measured for it, from Lhotse's budget
arguments (max_duration, max_cuts, quadratic_duration) or a Lhotse SamplingConstraint.

The planner wants integer lengths and an integer capacity; Lhotse measures examples in seconds
(cuts) or tokens (text examples, TokenConstraint). Each mapping here keeps the budget honest: a
batch of n examples whose longest planned length is L satisfies n * L <= capacity only if Lhotse's
constraint (padding included) holds for it. A constraint that cannot be mapped is one error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from lhotse.dataset.sampling.base import TimeConstraint, TokenConstraint
from lhotse.dataset.sampling.dynamic_bucketing import FixedBucketBatchSizeConstraint

from ..errors import UserError
from ..grouping import ceil_div
from .base import log

#: The largest budget in planning lengths (batch sizes per bucket are planned as lcm / size, exactly).
MAX_CAPACITY = 2**40
#: Lhotse's names of (the length budget, the count cap, the quadratic term), by unit.
NAMES = {
    "s": ("max_duration", "max_cuts", "quadratic_duration"),
    "tokens": ("max_tokens", "max_examples", "quadratic_length"),
}


@dataclass(frozen=True)
class Measure:
    """unit: "s" (durations, planned in frames of `step` seconds) or "tokens" (num_tokens, step 1).
    limit: max_duration or max_tokens (None: no length budget); max_cuts: at most this many a batch;
    quadratic: Lhotse's quadratic_duration / quadratic_length; bins / batch_sizes: a
    FixedBucketBatchSizeConstraint (at most batch_sizes[i] examples of bucket i, value <= bins[i])."""

    unit: str = "s"
    limit: float | None = None
    max_cuts: int | None = None
    quadratic: float | None = None
    step: float = 0.01
    bins: tuple[float, ...] = ()
    batch_sizes: tuple[int, ...] = ()

    @property
    def capacity(self) -> int | None:
        """The budget in planning lengths (None: no length budget, max_cuts alone)."""
        if self.batch_sizes:
            return math.lcm(*self.batch_sizes)
        return None if self.limit is None else max(1, int(self.limit / self.step + 1e-9))

    def values(self, examples: list) -> np.ndarray:
        """Each example's duration in seconds, or its num_tokens."""
        if self.unit == "s":
            return np.fromiter((example.duration for example in examples), np.float64, len(examples))
        tokens = [getattr(example, "num_tokens", None) for example in examples]
        if None in tokens:
            first = tokens.index(None)
            raise UserError(
                f"{example_name(examples[first], first)} has no num_tokens ({tokens.count(None)} such "
                "examples): TokenConstraint measures each example by its tokens; give every example "
                "tokens (cut.num_tokens), or budget cuts by max_duration"
            )
        return np.asarray(tokens, np.float64)

    def effective(self, values: np.ndarray) -> np.ndarray:
        """Lhotse's quadratic correction: an example costs value + value**2 / quadratic."""
        return values if self.quadratic is None else values + values**2 / self.quadratic

    def lengths(self, values: np.ndarray) -> np.ndarray:
        """Planning lengths, rounded up so the budget holds; with buckets, capacity / the bucket's batch
        size (an example over the last bin gets capacity + 1: over the budget, see too_long)."""
        if self.batch_sizes:
            bucket = np.searchsorted(np.asarray(self.bins), values, side="left")  # Lhotse's select_bucket
            per_bucket = np.append(self.capacity // np.asarray(self.batch_sizes, np.int64), self.capacity + 1)
            return per_bucket[bucket]
        frames = self.effective(values) / self.step  # in place from here: 10 million cuts, one array at a time
        np.ceil(np.round(frames, 6, out=frames), out=frames)
        lengths = frames.astype(np.int64)
        del frames
        return np.maximum(lengths, 1, out=lengths)

    def over_limit(self, value: float) -> str:
        """What an example of `value` over the budget is and is over, in the user's words."""
        amount = f"lasts {value:g} s" if self.unit == "s" else f"has {value:g} tokens"
        if self.batch_sizes:
            return f"{amount}, over the last bucket bound {self.bins[-1]:g} of FixedBucketBatchSizeConstraint"
        limit_name, _, quadratic_name = NAMES[self.unit]
        quadratic = (
            ""
            if self.quadratic is None
            else (f" ({self.effective(np.array([value]))[0]:.3g} with {quadratic_name}={self.quadratic:g})")
        )
        return f"{amount}{quadratic}, over {limit_name}={self.limit:g}{' s' if self.unit == 's' else ''}"


def fit_budget(
    measure: Measure,
    capacity: int,
    too_long: str,
    values: np.ndarray,
    lengths: np.ndarray,
    kept: np.ndarray,
    examples,
    offset: int = 0,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Examples over the budget (`capacity`, in planning lengths): refused, skipped or planned alone,
    as too_long says; then, with max_cuts, an example shorter than capacity / max_cuts counts as that
    long. Returns (kept, lengths, how many were skipped). examples[i] is the source's example
    `offset + i` (named by that place in the error when it has no id)."""
    over = kept & (lengths > capacity)
    skipped = 0
    if over.any():
        first = int(np.flatnonzero(over)[0])
        what = f"{example_name(examples[first], offset + first)} {measure.over_limit(values[first])}"
        if too_long == "error":
            such = f"{int(over.sum())} such {'cuts' if measure.unit == 's' else 'examples'}"
            raise UserError(
                f"{what} ({such}): raise the budget, or pass too_long='skip' (leave them out, counted) "
                "or too_long='alone' (each in a batch of its own, as Lhotse does)"
            )
        if too_long == "skip":
            skipped = int(over.sum())
            log.warning("PlanCutSampler: skipped %d examples over the budget (the first: %s)", skipped, what)
            kept = kept & ~over
        else:  # alone: as long as the budget, so nothing joins it
            lengths = np.minimum(lengths, capacity)
    if measure.max_cuts is not None:
        lengths = np.maximum(lengths, ceil_div(capacity, measure.max_cuts))
    return kept, lengths, skipped


def example_name(example, index: int) -> str:
    """A cut by its id; a text example (which has none) by its place."""
    return f"cut {example.id!r}" if hasattr(example, "id") else f"example {index}"


def measure_from(
    constraint, max_duration: float | None, max_cuts: int | None, quadratic_duration: float | None, frame_shift: float
) -> Measure:
    """The Measure of Lhotse's budget arguments, or of `constraint` (then they must be unset)."""
    if constraint is None:
        return _checked(Measure("s", max_duration, max_cuts, quadratic_duration, frame_shift))
    given = [
        f"{k}={v}"
        for k, v in (("max_duration", max_duration), ("max_cuts", max_cuts), ("quadratic_duration", quadratic_duration))
        if v is not None
    ]
    if given:
        raise UserError(
            f"the budget is given twice: constraint={type(constraint).__name__} and {', '.join(given)}; keep one"
        )
    if type(constraint) is TimeConstraint and not constraint.concatenate_cuts:
        return _checked(
            Measure("s", constraint.max_duration, constraint.max_cuts, constraint.quadratic_duration, frame_shift)
        )
    if type(constraint) is TokenConstraint:
        return _checked(
            Measure("tokens", constraint.max_tokens, constraint.max_examples, constraint.quadratic_length, 1.0)
        )
    if type(constraint) is FixedBucketBatchSizeConstraint:
        sizes = tuple(constraint.batch_sizes)
        if len(sizes) != len(constraint.max_seq_len_buckets) or not all(isinstance(s, int) and s >= 1 for s in sizes):
            raise UserError(
                f"FixedBucketBatchSizeConstraint needs one positive batch size per bucket bound, got "
                f"batch_sizes={list(sizes)} for max_seq_len_buckets={list(constraint.max_seq_len_buckets)}"
            )
        if math.lcm(*sizes) > MAX_CAPACITY:
            raise UserError(
                f"FixedBucketBatchSizeConstraint's batch sizes {list(sizes)} have a least common multiple "
                f"over {MAX_CAPACITY}, the planner's exact budget for them: round some batch sizes"
            )
        return Measure("s", bins=tuple(map(float, constraint.max_seq_len_buckets)), batch_sizes=sizes)
    raise UserError(
        f"constraint={type(constraint).__name__} cannot be planned by PlanCutSampler: it takes Lhotse's "
        "TimeConstraint (without concatenate_cuts), TokenConstraint and FixedBucketBatchSizeConstraint "
        "themselves (a subclass may count otherwise), or max_duration / max_cuts"
    )


def _checked(measure: Measure) -> Measure:
    limit_name, cuts_name, quadratic_name = NAMES[measure.unit]
    for name, value in ((limit_name, measure.limit), (quadratic_name, measure.quadratic)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise UserError(f"{name}={value!r} must be a positive number")
    max_cuts = measure.max_cuts
    if max_cuts is not None and (isinstance(max_cuts, bool) or not isinstance(max_cuts, int) or max_cuts < 1):
        raise UserError(f"{cuts_name}={max_cuts!r} must be a positive integer")
    return measure
