"""The batching hyper-parameters: one frozen, validated record shared by the planner, sampler and CLI."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .options import OptionError, coerce, parse_overrides
from .strategies import KEYS, STRATEGIES, STRATEGY_TABLE


@dataclass(frozen=True)
class BatchingConfig:
    """How one epoch is cut into batches (defaults: the paper's LJSpeech setup).

    batching: rand (shuffle), sb (sort), ssb (sort by length + U(-a/2, a/2) noise,
    a = (max - min) * lrf), bkt (sort, shuffle inside buckets of bucket_size samples),
    ats (shuffle, n_bins bins sorted alternately up and down).
    dbs: dynamic batch sizes under a token budget of `capacity` frames (default
    batch_size * max length, the paper's B0 * L_max); br: shuffle the batch order.
    stream: the blog's streaming length-bucket sampler (batching/stream.py): a seeded stream,
    buckets of bucket_interval frames, samples over max_length frames (None: no limit) skipped
    and reported; always token-budget batches, so dbs is implied (set to true). stream_key=cost
    (None: length) makes the buckets equal widths in SSB's cost key instead of in frames, as many
    as bucket_interval cuts the length range into.
    bload: BLoad block packing (batching/bload.py): batches of batch_size blocks of block_length
    frames (None: the longest utterance) filled with randomly drawn utterances, each starting on
    a multiple of n_frames_per_step; dbs and br do not apply (dbs is set to false, blocks are
    always shuffled).
    target_zpr / target_pair_repeat (ssb only, at most one): the width lrf is to be calibrated to
    this ZPR (%) or pair_repeat on the training lengths (batching.analysis.resolve_width, which
    the samplers and `python -m batching` call once); lrf is then the resolved width. Until then
    lrf is None (`pending_target`) and the planner refuses the config; an lrf given with a target
    is taken as its resolved width (as a sampler's state records it). Without a target lrf
    defaults to 0.1, the paper's. target_zpr="paper": the ZPR the paper's SSB (the length key,
    lrf 0.1) plans on the same lengths.
    """

    batching: str = "rand"
    batch_size: int = 16
    lrf: float | None = None
    bucket_size: int = 1024
    n_bins: int = 58
    dbs: bool = False
    br: bool = False
    capacity: int | None = None
    drop_last: bool = False
    seed: int = 0
    bucket_interval: int = 50
    max_length: int | None = None
    block_length: int | None = None
    n_frames_per_step: int = 1
    ssb_key: str | None = None
    target_zpr: float | str | None = None
    target_pair_repeat: float | None = None
    stream_key: str | None = None

    def __post_init__(self) -> None:
        if self.batching not in STRATEGIES:
            _bad("batching", self.batching, "one of " + ", ".join(repr(s) for s in STRATEGIES))
        for name in ("batch_size", "bucket_size", "n_bins"):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("seed", self.seed, minimum=0)
        if self.lrf is None and self.target_zpr is None and self.target_pair_repeat is None:
            object.__setattr__(self, "lrf", DEFAULT_LRF)  # no width to calibrate: the paper's
        if self.lrf is not None and (
            isinstance(self.lrf, bool) or not isinstance(self.lrf, (int, float)) or not 0 <= self.lrf < float("inf")
        ):
            _bad("lrf", self.lrf, "a finite number >= 0")
        for name in ("dbs", "br", "drop_last"):
            if not isinstance(getattr(self, name), bool):
                _bad(name, getattr(self, name), "true or false")
        _check_int("bucket_interval", self.bucket_interval, minimum=1)
        _check_int("n_frames_per_step", self.n_frames_per_step, minimum=1)
        for name in OPTIONAL_INTS:  # None (null in hparams.yaml) is unset: each field's doc says what that means
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), minimum=1, unset=True)
        strategy = STRATEGY_TABLE[self.batching]
        for name in OWNED_OPTIONS:
            value = getattr(self, name)
            if value is not None and name not in strategy.options:
                owners = ", ".join(s.name for s in STRATEGY_TABLE.values() if name in s.options)
                raise OptionError(f"{name}={value} applies only to batching={owners}")
        for name in strategy.forbids:
            if getattr(self, name) is not None:
                raise OptionError(
                    f"{name}={getattr(self, name)} does not apply to batching={self.batching} ({strategy.summary})"
                )
        self._check_key_options()
        if strategy.dbs is not None:  # e.g. stream batches are always token-budget batches, bload blocks never
            object.__setattr__(self, "dbs", strategy.dbs)
        if self.capacity is not None and not self.dbs:
            raise OptionError(
                f"capacity={self.capacity} is a token budget for dynamic batch sizes: add dbs=true "
                "(or drop capacity to use fixed batches of batch_size)"
            )

    def _check_key_options(self) -> None:
        """ssb_key and stream_key (None: length, the paper's and the blog's) and the calibration
        targets (ownership is checked above)."""
        for name in ("ssb_key", "stream_key"):
            if getattr(self, name) is not None and getattr(self, name) not in KEYS:
                _bad(name, getattr(self, name), "one of " + ", ".join(repr(k) for k in KEYS))
        for name, top in TARGETS.items():
            value, words = getattr(self, name), TARGET_WORDS.get(name, {})
            if value in words:
                continue
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < top
            ):
                also = "".join(f", '{word}' ({meaning})" for word, meaning in words.items())
                _bad(name, value, f"a number in (0, {top}){also}, or null (None) to leave it unset")
        if self.target_zpr is not None and self.target_pair_repeat is not None:
            raise OptionError(
                f"target_zpr={self.target_zpr} and target_pair_repeat={self.target_pair_repeat} "
                "both calibrate lrf: keep one"
            )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> BatchingConfig:
        """Build from a mapping (YAML, `key=value` strings); unknown keys are an error, never ignored."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise OptionError(f"unknown batching option(s) {', '.join(unknown)}: allowed are {', '.join(fields)}")
        return cls(**{k: _coerce(k, v, fields[k].type) for k, v in values.items()})

    @classmethod
    def from_hparams(cls, text: str) -> BatchingConfig:
        """Parse `batching=ssb,lrf=0.1,dbs=true` (the recipe's --hparams style)."""
        try:
            values = parse_overrides(text)
        except OptionError as error:
            raise OptionError(f"hparam {error}") from None
        return cls.from_dict(values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def with_strategy(self, batching: str, **changes: Any) -> BatchingConfig:
        """This config with another strategy: the options that only other strategies own (e.g.
        max_length, block_length) and those the target refuses are dropped, everything else (B0,
        dbs, capacity, the seed) carries over, then `changes` apply. The one way to switch: used
        where strategies are compared (`python -m batching calibrate`, `sweep`, `plot`; the data
        check's RAND baseline), so a new strategy's options need no caller to know them."""
        if batching not in STRATEGY_TABLE:
            _bad("batching", batching, "one of " + ", ".join(repr(s) for s in STRATEGIES))
        target = STRATEGY_TABLE[batching]
        dropped = {name: None for name in (*OWNED_OPTIONS, *target.forbids) if name not in target.options}
        return dataclasses.replace(self, batching=batching, **(dropped | changes))

    @property
    def pending_target(self) -> str | None:
        """`target_zpr=...` (or target_pair_repeat) while it waits for its width (lrf None), which
        batching.analysis.resolve_width calibrates on the lengths to plan; None when lrf is set."""
        if self.lrf is not None:
            return None
        return next(f"{name}={getattr(self, name)}" for name in TARGETS if getattr(self, name) is not None)

    @property
    def plans_blocks(self) -> bool:
        """Whether this strategy's plan is a block plan (its row's block_plan, strategies.py): the one
        home of the question. The sampler, the loader, the Lhotse sampler, the CLI and the recipe's
        checks take this answer, so a new block-plan strategy needs its row and nothing else."""
        return STRATEGY_TABLE[self.batching].block_plan

    def length_limit(self) -> tuple[int | None, str]:
        """The longest sample the planner accepts, and why: an explicit DBS capacity, or a
        block_length (None: no limit; the default capacity B0 x L_max fits every sample, and
        samples over max_length are skipped and reported rather than refused, so a capacity
        limits only when it is below max_length)."""
        if self.block_length is not None:
            return self.block_length, f"block_length={self.block_length} frames"
        if self.capacity is not None and (self.max_length is None or self.capacity < self.max_length):
            return self.capacity, f"the batch capacity of {self.capacity} frames (capacity)"
        return None, "no limit"


#: Options that belong to particular strategies (STRATEGY_TABLE's `options`); None when unset.
OWNED_OPTIONS = tuple(dict.fromkeys(name for s in STRATEGY_TABLE.values() for name in s.options))
#: The `int | None` fields (capacity and the owned options): a positive integer, or None for unset.
OPTIONAL_INTS = tuple(f.name for f in dataclasses.fields(BatchingConfig) if f.type == "int | None")
_KINDS = {
    "bool": bool,
    "int": int,
    "int | None": int,
    "float": float,
    "str": str,
    "float | None": float,
    "str | None": str,
    "float | str | None": float,
}
#: SSB's noise width when neither lrf nor a target is given (the paper's).
DEFAULT_LRF = 0.1
#: The calibration targets and their (exclusive) upper bounds: ZPR in percent, pair_repeat a fraction.
TARGETS = {"target_zpr": 100.0, "target_pair_repeat": 1.0}
#: target_zpr's one word: the ZPR the paper's SSB (the length key, lrf 0.1) plans on the same lengths,
#: budget and seed (batching.analysis.resolve_width), so another key pads as much as the paper's SSB.
PAPER_TARGET = "paper"
#: The words a calibration target takes beside a number, each with what it means (one home for both
#: the parsing and the check).
TARGET_WORDS = {"target_zpr": {PAPER_TARGET: "the paper's SSB's ZPR on these lengths"}}


def _bad(name: str, value: Any, allowed: str) -> None:
    raise OptionError(f"BatchingConfig.{name}={value!r} is invalid: expected {allowed}")


def _check_int(name: str, value: Any, minimum: int, unset: bool = False) -> None:
    """`unset`: None is allowed too, and the message says so (0 is not a sentinel for it)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        _bad(name, value, f"an integer >= {minimum}" + (", or null (None) to leave it unset" if unset else ""))


def _coerce(name: str, value: Any, annotation: str) -> Any:
    """Command-line strings as the field's type; other values pass through to validation."""
    if not isinstance(value, str):
        return value
    if value.strip() in TARGET_WORDS.get(name, {}):
        return value.strip()
    try:
        return coerce(name, value, _KINDS[annotation], optional=annotation.endswith("| None"))
    except OptionError:
        _bad(name, value, f"a value of type {annotation}")
