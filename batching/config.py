"""The batching hyper-parameters: one frozen, validated record shared by the planner, sampler and CLI."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

STRATEGIES = ("rand", "sb", "ssb", "bkt", "ats", "stream", "bload")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


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
    and reported; always token-budget batches, so dbs is implied (set to true).
    bload: BLoad block packing (batching/bload.py): batches of batch_size blocks of block_length
    frames (None: the longest utterance) filled with randomly drawn utterances, each starting on
    a multiple of n_frames_per_step; dbs and br do not apply (dbs is set to false, blocks are
    always shuffled).
    """

    batching: str = "rand"
    batch_size: int = 16
    lrf: float = 0.1
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

    def __post_init__(self) -> None:
        if self.batching not in STRATEGIES:
            _bad("batching", self.batching, "one of " + ", ".join(repr(s) for s in STRATEGIES))
        for name in ("batch_size", "bucket_size", "n_bins"):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("seed", self.seed, minimum=0)
        if isinstance(self.lrf, bool) or not isinstance(self.lrf, (int, float)) or not 0 <= self.lrf < float("inf"):
            _bad("lrf", self.lrf, "a finite number >= 0")
        for name in ("dbs", "br", "drop_last"):
            if not isinstance(getattr(self, name), bool):
                _bad(name, getattr(self, name), "true or false")
        _check_int("bucket_interval", self.bucket_interval, minimum=1)
        if self.max_length is not None:
            _check_int("max_length", self.max_length, minimum=1)
            if self.batching != "stream":
                raise ValueError(f"max_length={self.max_length} applies only to batching=stream")
        _check_int("n_frames_per_step", self.n_frames_per_step, minimum=1)
        if self.block_length is not None:
            _check_int("block_length", self.block_length, minimum=1)
            if self.batching != "bload":
                raise ValueError(f"block_length={self.block_length} applies only to batching=bload")
        if self.batching == "bload":
            if self.capacity is not None:
                raise ValueError(f"capacity={self.capacity} does not apply to batching=bload: its batches are "
                                 "batch_size blocks of block_length frames")
            object.__setattr__(self, "dbs", False)  # blocks have a fixed length: no token budget
        if self.batching == "stream" and not self.dbs:
            object.__setattr__(self, "dbs", True)  # stream batches are always token-budget batches
        if self.capacity is not None:
            _check_int("capacity", self.capacity, minimum=1)
            if not self.dbs:
                raise ValueError(f"capacity={self.capacity} is a token budget for dynamic batch sizes: add dbs=true "
                                 "(or drop capacity to use fixed batches of batch_size)")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "BatchingConfig":
        """Build from a mapping (YAML, `key=value` strings); unknown keys are an error, never ignored."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ValueError(f"unknown batching option(s) {', '.join(unknown)}: allowed are {', '.join(fields)}")
        return cls(**{k: _coerce(k, v, cls.__dataclass_fields__[k].type) for k, v in values.items()})

    @classmethod
    def from_hparams(cls, text: str) -> "BatchingConfig":
        """Parse `batching=ssb,lrf=0.1,dbs=true` (the recipe's --hparams style)."""
        values = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"hparam {item!r} is not of the form key=value")
            values[key.strip()] = value.strip()
        return cls.from_dict(values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _bad(name: str, value: Any, allowed: str) -> None:
    raise ValueError(f"BatchingConfig.{name}={value!r} is invalid: expected {allowed}")


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        _bad(name, value, f"an integer >= {minimum}")


def _coerce(name: str, value: Any, annotation: str) -> Any:
    """Turn command-line strings into the field's type; other values pass through to validation."""
    if not isinstance(value, str) or annotation == "str":
        return value
    text = value.strip().lower()
    try:
        if annotation == "bool":
            if text in _TRUE | _FALSE:
                return text in _TRUE
            return value
        if annotation == "int | None" and text in {"none", "null", ""}:
            return None
        if annotation in ("int", "int | None"):
            return int(text)
        if annotation == "float":
            return float(text)
    except ValueError:
        _bad(name, value, f"a value of type {annotation}")
    return value
