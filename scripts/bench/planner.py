"""Planner speed: one epoch of 10M lengths (ssb + dbs + br, with each ssb_key) against numpy.argsort,
and LJSpeech's train set.

Targets: at most 3x argsort of the same array, 1.5x with ssb_key=cost (the key is one histogram
and one pass); the 10,480 LJSpeech lengths well under 10 ms.
The numba JIT warm-up (compilation, or loading its cache) is done first and not timed.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from batching import BatchingConfig, plan_epoch, plan_global, read_lengths, train_split
from data.shared import LJSPEECH_LENGTHS
from scripts.common import median_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lengths", type=Path, default=LJSPEECH_LENGTHS, help="LJSpeech lengths.tsv to draw from")
    parser.add_argument("-n", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    if args.lengths.is_file():
        real = read_lengths(args.lengths)
        source = f"resampled from {args.lengths}"
    else:  # a stand-in with LJSpeech's range and spread
        real = np.clip(rng.normal(470, 170, 13_100), 24, 807).astype(np.int64)
        source = "drawn from N(470, 170) clipped to [24, 807] (LJSpeech lengths not found)"
    big = rng.choice(real, args.n)
    config = BatchingConfig("ssb", dbs=True, br=True)
    plan_epoch(big[:1000], config)  # JIT warm-up, not timed

    t_sort = median_seconds(args.repeats, np.argsort, big)
    cost = dataclasses.replace(config, ssb_key="cost")
    plan_epoch(big[:1000], cost)  # JIT warm-up of the cost key, not timed
    t_plan = median_seconds(args.repeats, plan_epoch, big, config)
    t_cost = median_seconds(args.repeats, plan_epoch, big, cost)
    print(f"{args.n:,} lengths {source}; median of {args.repeats} runs; numba warm-up excluded")
    print(f"numpy.argsort:                   {t_sort:8.3f} s")
    print(f"plan_epoch ssb+dbs+br:           {t_plan:8.3f} s  ratio {t_plan / t_sort:5.2f}x  (target <= 3x)")
    print(f"plan_epoch ssb_key=cost+dbs+br:  {t_cost:8.3f} s  ratio {t_cost / t_sort:5.2f}x  (target <= 1.5x)")

    if args.lengths.is_file():
        train = real[train_split(real.size)]
        t_lj = median_seconds(50, plan_epoch, train, config)
        print(f"LJSpeech train ({train.size:,} lengths) ssb+dbs+br: {t_lj * 1e3:.2f} ms  (target well under 10 ms)")
        stream = BatchingConfig("stream", br=True)
        plan_global(train, stream, 0, 4)  # JIT warm-up, not timed
        t_stream = median_seconds(50, plan_global, train, stream, 0, 4)
        print(f"LJSpeech train, batching=stream on 4 ranks: {t_stream * 1e3:.2f} ms  (target under 50 ms)")


if __name__ == "__main__":
    main()
