"""The decoder loop's padded shapes: a few fixed shapes for a whole run, ready for CUDA graphs.

A CUDA graph replays one fixed shape, and the decoder loop's shape (rows, decoder steps, text
symbols) differs for nearly every batch. Rounding each batch's mel frames up to a multiple of
`graph_bucket` and, per frame bucket, its rows up to the largest batch the run ever has there and
its text up to the longest text any utterance that fits there has, leaves one shape per frame
bucket for the whole run. The rounding happens inside the decoder (model/fast_decoder.py), which
runs the bigger shape on zero-padded inputs and slices the results back, so the plan, ZPR, ABL
and the loss stay the paper's; only the decoder computes a few more steps and rows.

The table is built from host-side lengths and the run's batches (index arrays): the model never
sees the planner, and the caller decides which batches (every epoch of the run, every rank).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

#: Text positions are rounded up to a multiple of this.
TEXT_MULTIPLE = 16


@dataclass(frozen=True, order=True)
class LoopShape:
    """The padded shape a batch's decoder loop runs: rows, mel frames (a multiple of r) and text."""

    rows: int
    frames: int
    text: int


def ceil_div(value, divisor):
    """value / divisor rounded up, for ints, numpy arrays and integer tensors alike: the model's,
    the data's and the training loop's one spelling (batching/ has its own, as it imports no model)."""
    return -(-value // divisor)


def round_up(value, multiple):
    """value rounded up to a multiple of `multiple` (ints, arrays, tensors)."""
    return ceil_div(value, multiple) * multiple


@dataclass(frozen=True)
class ShapeTable:
    """Frame bucket -> the rows and text that every batch of that bucket is padded to."""

    graph_bucket: int
    rows: Mapping[int, int]
    text: Mapping[int, int]

    def shape_of(self, rows: int, frames: int, text: int) -> LoopShape:
        """The shape of a batch of `rows` rows padded to `frames` mel frames and `text` symbols. A
        batch the table does not cover (a plan it was not built from) keeps its own rows or text,
        and so gets a shape of its own (LoopShape not in shapes())."""
        bucket = round_up(frames, self.graph_bucket)
        return LoopShape(
            max(rows, self.rows.get(bucket, 0)), bucket, max(round_up(text, TEXT_MULTIPLE), self.text.get(bucket, 0))
        )

    def shapes(self) -> list[LoopShape]:
        """Every shape of the table, largest (most frames) first: the capture order."""
        return sorted((LoopShape(self.rows[f], f, self.text[f]) for f in self.rows), reverse=True)


def shape_table(
    batches: Iterable[np.ndarray], frames: np.ndarray, text_lengths: np.ndarray, graph_bucket: int
) -> ShapeTable:
    """The table of a run from its batches (sample indices; pass every epoch's batches of every
    rank, so every epoch and rank uses the same shapes), the samples' mel frames and text lengths."""
    frames = np.asarray(frames)
    extents = [(int(frames[batch].max()), len(batch)) for batch in batches]
    longest, sizes = (
        (np.array(column, dtype=np.int64) for column in zip(*extents))
        if extents
        else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    )
    return shape_table_of(longest, sizes, frames, text_lengths, graph_bucket)


def shape_table_of(
    longest: np.ndarray, sizes: np.ndarray, frames: np.ndarray, text_lengths: np.ndarray, graph_bucket: int
) -> ShapeTable:
    """The table from each batch's longest mel frames and size (arrays, one entry a batch: a run of
    many epochs of a large corpus passes millions, so no Python loop over them). Text per frame
    bucket is the longest text of any sample short enough for that bucket, so a bucket's text never
    depends on which batches were seen."""
    frames, text_lengths = np.asarray(frames), np.asarray(text_lengths)
    buckets, where = np.unique(round_up(np.asarray(longest, np.int64), graph_bucket), return_inverse=True)
    most = np.zeros(buckets.size, np.int64)
    np.maximum.at(most, where, np.asarray(sizes, np.int64))
    order = np.argsort(frames, kind="stable")
    longest_text = np.maximum.accumulate(text_lengths[order])  # over all samples up to each length
    fits = np.searchsorted(frames[order], buckets, side="right")
    text = round_up(longest_text[fits - 1], TEXT_MULTIPLE)
    return ShapeTable(
        graph_bucket, dict(zip(buckets.tolist(), most.tolist())), dict(zip(buckets.tolist(), text.tolist()))
    )
