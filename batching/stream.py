"""The streaming length-bucket sampler of the blog (seed 001, "Batch采样策略的优化"), made exact.

The blog reads samples one at a time, puts each in a bucket by length (interval `i`, samples
longer than `l` left out) and emits a bucket as a batch when its token count would pass the
budget. Its two admitted weaknesses are fixed here:

* end of epoch: the blog stops when the reader reaches the end and leaves 2-5k samples in the
  buckets (carried over or lost). Here every non-empty bucket is flushed as a batch at the end
  of the stream, in ascending bucket order, so each kept sample is in exactly one batch.
* stream order: the stream is a permutation of the samples seeded with (seed, epoch), so the
  same seed and epoch give the same plan on every rank and every run, and each epoch a new one.

Rules (one pass, O(N) time, O(#buckets * batch) memory):

* bucket of a sample: floor(length / bucket_interval) (stream_key=length, the blog's); with
  stream_key=cost, floor(G(l) * n) among n = (L_max - L_min) // bucket_interval + 1 buckets of
  equal width in SSB's cost key G (cost_key.py; as many buckets as the interval cuts the length
  range into), G fitted on the lengths the planner is given (StreamBucketer: on whatever
  reference the caller fits its CostKey to; unseen lengths outside it go to the first or last
  bucket and are counted);
* a sample longer than max_length (when set) is skipped and counted, never silently: the
  planner warns and `skipped_samples` / `StreamBucketer.skipped` / `python -m batching stats`
  report it;
* before a sample joins its bucket, if (n + 1) * max(longest in bucket, length) would pass the
  budget, the bucket's n samples are emitted as a batch and the sample starts it afresh: no
  batch is ever over the budget (the blog's own test uses the bucket's upper bound
  (bucket + 1) * i instead of the real longest sample, which leaves batches emptier);
* budget: `capacity` frames, else batch_size * (longest kept sample), the DBS default B0 * L_max.
  A kept sample longer than the budget on its own is an error (raise capacity, or set
  max_length to skip such samples). `dbs` is implied: BatchingConfig sets it to true.

Multi-GPU: the blog splits each emitted bucket by idx % world_size == rank, which gives ranks
unequal batch counts at the flush (and hangs DDP). Here every rank plans the same stream and the
emitted batches go through the same sharding as every other strategy (batching.sharding.arrange):
batch count made a multiple of world_size by the same tail rules, steps of world_size batches of
neighbouring length, steps shuffled with br=true (else in emission order). `deal_steps` does the
same with bounded memory for a consumer that reads a real stream.

StreamBucketer is the reference, streaming implementation (any iterator of (index, length));
plan_stream runs the same algorithm compiled on the planner's arrays (identical batches).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator

import numba
import numpy as np

from .budget import SKIP_ADVICE, over_limit, token_budget
from .config import BatchingConfig
from .cost_key import CostKey
from .plan import GlobalPlan, as_lengths
from .sharding import _split_largest, arrange


class StreamBucketer:
    """The stream sampler over any iterator: push (index, length) pairs, get batches back.

    push() returns a full batch (list of indices) when the sample's arrival emits one, else
    None; flush() returns the non-empty buckets (ascending bucket order) and empties them; run()
    does both over an iterable. `skipped` counts samples over max_length, `seen` all pushed.
    With a `key` (stream_key=cost) the buckets are equal widths in it (key_bucket_count);
    `outside` counts the kept lengths its reference did not span (clamped into the end buckets).
    """

    def __init__(self, budget: int, interval: int, max_length: int | None = None, key: CostKey | None = None) -> None:
        if budget < 1 or interval < 1 or (max_length is not None and max_length < 1):
            raise ValueError(f"budget={budget}, interval={interval} and max_length={max_length} must be >= 1")
        self.budget, self.interval, self.max_length = int(budget), int(interval), max_length
        self.key = key
        self.skipped = 0
        self.seen = 0
        self.outside = 0
        self._buckets: dict[int, list[int]] = {}
        self._longest: dict[int, int] = {}

    @property
    def pending(self) -> int:
        """Samples held in the buckets, waiting for a batch."""
        return sum(map(len, self._buckets.values()))

    def push(self, index: int, length: int) -> list[int] | None:
        self.seen += 1
        if self.max_length is not None and length > self.max_length:
            self.skipped += 1
            return None
        if length > self.budget:
            raise over_limit(index, length, f"the batch capacity of {self.budget} frames", SKIP_ADVICE)
        if self.key is None:
            b = length // self.interval
        else:
            self.outside += self.key.outside([length])
            b = int(self.key.buckets([length], key_bucket_count(self.key, self.interval))[0])
        bucket = self._buckets.setdefault(b, [])
        grown = max(self._longest.get(b, 0), length)
        full = None
        if bucket and (len(bucket) + 1) * grown > self.budget:
            full, bucket = bucket, []
            self._buckets[b] = bucket
            grown = length
        bucket.append(index)
        self._longest[b] = grown
        return full

    def flush(self) -> list[list[int]]:
        out = [self._buckets[b] for b in sorted(self._buckets) if self._buckets[b]]
        self._buckets.clear()
        self._longest.clear()
        return out

    def run(self, pairs: Iterable[tuple[int, int]]) -> Iterator[list[int]]:
        """All batches of one pass over `pairs`, the flushed buckets last."""
        for index, length in pairs:
            full = self.push(index, length)
            if full is not None:
                yield full
        yield from self.flush()


def deal_steps(
    batches: Iterable[list[int]], world_size: int, window: int = 1, key: Callable[[list[int]], int] | None = None
) -> Iterator[list[list[int]]]:
    """Deal a stream of batches to ranks in lock-step: yields steps of world_size batches
    (rank r runs step[r]), so every rank gets the same number of batches.

    Batches are dealt window * world_size at a time; with `key` (e.g. a batch's longest
    sample) each group is sorted by it before it is cut into steps, so ranks in a step get
    batches of similar length. Memory: at most 2 * window * world_size batches are held, the
    last group being kept back until the stream ends. The end follows arrange's rules without
    drop_last, applied to what is held: the largest held batches are split in two until the
    count is a multiple of world_size; samples repeat (cyclically, as single-sample batches)
    only when every held batch is a single sample.
    """
    if world_size < 1 or window < 1:
        raise ValueError(f"world_size={world_size} and window={window} must be >= 1")
    size = window * world_size
    held: list[list[int]] = []
    for batch in batches:
        held.append(list(batch))
        if len(held) == 2 * size:
            yield from _steps(held[:size], world_size, key)
            held = held[size:]
    if len(held) % world_size:
        order = np.concatenate([np.asarray(b, np.int64) for b in held])
        cuts = np.concatenate([[0], np.cumsum([len(b) for b in held])]).astype(np.int64)
        order, cuts = _split_largest(order, cuts, -len(held) % world_size)
        held = [order[a:b].tolist() for a, b in zip(cuts[:-1], cuts[1:])]
    yield from _steps(held, world_size, key)


def _steps(buffer, world_size, key):
    if key is not None:
        buffer = sorted(buffer, key=key)
    for s in range(0, len(buffer), world_size):
        yield buffer[s : s + world_size]


def skipped_samples(lengths: np.ndarray, config: BatchingConfig) -> np.ndarray:
    """Indices of the samples batching=stream leaves out (longer than max_length, an option only
    stream takes); empty when max_length is unset."""
    lengths = np.asarray(lengths)
    if config.max_length is None:
        return np.zeros(0, np.int64)
    return np.flatnonzero(lengths > config.max_length).astype(np.int64)


def stream_budget(lengths: np.ndarray, config: BatchingConfig) -> int:
    """The token budget in frames (budget.token_budget) of the samples stream keeps."""
    kept = None if config.max_length is None else np.flatnonzero(lengths <= config.max_length)
    return token_budget(lengths, config, kept, SKIP_ADVICE)


def key_bucket_count(key: CostKey, interval: int) -> int:
    """stream_key=cost's number of buckets: as many as bucket_interval cuts the key's length range into."""
    return (key.high - key.low) // interval + 1


def bucket_ids(lengths: np.ndarray, interval: int, key: CostKey | None) -> np.ndarray:
    """Each length's bucket: length // interval, or with a key its equal-width bucket in G (module doc)."""
    if key is None:
        return np.asarray(lengths, np.int64) // interval
    return key.buckets(lengths, key_bucket_count(key, interval))


def stream_cuts(ordered_lengths: np.ndarray, buckets: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """One pass of the bucketer over lengths in stream order (all kept, each <= budget) and their
    buckets (bucket_ids): returns (positions, cuts), batch b being positions[cuts[b]:cuts[b+1]] in
    emission order."""
    if ordered_lengths.size == 0:
        return np.zeros(0, np.int64), np.zeros(1, np.int64)
    return _stream_cuts(
        np.ascontiguousarray(ordered_lengths, dtype=np.int64),
        np.ascontiguousarray(buckets, dtype=np.int64),
        np.int64(budget),
    )


@numba.njit(cache=True, nogil=True)
def _stream_cuts(lengths, buckets, budget):  # pragma: no cover - compiled
    n = lengths.size
    n_buckets = buckets.max() + 1
    shortest = np.full(n_buckets, budget, np.int64)
    members = np.zeros(n_buckets, np.int64)
    for p in range(n):
        shortest[buckets[p]] = min(shortest[buckets[p]], lengths[p])
        members[buckets[p]] += 1
    # a batch of bucket b holds at most budget // (its shortest length) samples, and at most its members
    offsets = np.zeros(n_buckets + 1, np.int64)
    for b in range(n_buckets):
        offsets[b + 1] = offsets[b] + min(members[b], budget // max(1, shortest[b]))
    held = np.empty(offsets[n_buckets], np.int64)
    count = np.zeros(n_buckets, np.int64)
    longest = np.zeros(n_buckets, np.int64)
    positions = np.empty(n, np.int64)
    cuts = np.empty(n + 1, np.int64)
    cuts[0] = 0
    n_cuts = 1
    written = 0
    for p in range(n):
        length = lengths[p]
        b = buckets[p]
        grown = max(longest[b], length)
        if count[b] > 0 and (count[b] + 1) * grown > budget:
            positions[written : written + count[b]] = held[offsets[b] : offsets[b] + count[b]]
            written += count[b]
            cuts[n_cuts] = written
            n_cuts += 1
            count[b] = 0
            grown = length
        held[offsets[b] + count[b]] = p
        count[b] += 1
        longest[b] = grown
    for b in range(n_buckets):  # the end-of-epoch flush, shortest bucket first
        if count[b] > 0:
            positions[written : written + count[b]] = held[offsets[b] : offsets[b] + count[b]]
            written += count[b]
            cuts[n_cuts] = written
            n_cuts += 1
    return positions, cuts[:n_cuts].copy()


def plan_stream(lengths, config: BatchingConfig, epoch: int = 0, world_size: int = 1) -> GlobalPlan:
    """The global plan of one epoch of batching=stream (what plan_global returns for it)."""
    lengths = as_lengths(lengths)
    rng = np.random.default_rng([config.seed, epoch])
    stream = rng.permutation(lengths.size)
    skipped = skipped_samples(lengths, config)
    if skipped.size:
        warnings.warn(
            f"batching=stream: {skipped.size} of {lengths.size} samples are longer than "
            f"max_length={config.max_length} frames and are skipped (longest "
            f"{int(lengths[skipped].max())} frames)",
            stacklevel=2,
        )
        stream = stream[lengths[stream] <= config.max_length]
    budget = stream_budget(lengths, config)
    key = CostKey(lengths[stream]) if config.stream_key == "cost" and stream.size else None
    buckets = bucket_ids(lengths[stream], config.bucket_interval, key)
    positions, cuts = stream_cuts(lengths[stream], buckets, budget)
    order, cuts, seq = arrange(
        stream[positions], cuts, lengths, world_size, config.drop_last, rng if config.br else None
    )
    return GlobalPlan(order, cuts, seq, world_size, skipped=skipped)
