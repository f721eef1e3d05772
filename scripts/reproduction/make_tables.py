"""Tables 2, 3, 4 and Fig. 4 of the paper from the run directories that scripts/reproduction/table2.sh wrote.

    python -m scripts.reproduction.make_tables runs/table2 [--out DIR] [--val-loss padded|valid] [--seeds S,...]
                                                             [--variant LABEL=DIR ...]

Every number comes from RUNS_ROOT/<experiment>/seed<S>/metrics.jsonl (plus validate_every from
hparams.json); the paper's own figures are printed beside them, always labelled as the paper's.
With several seeds, a cell is the mean over the seeds, and the VL cells add the sample standard
deviation (mean ± sd), the noise any difference between strategies has to beat.

- ZPR, ABL and minutes per epoch are means over the run's epochs (train_seconds: training only).
- VL1-3 are the validation losses at epochs 100, 160 and 220 (1-based), each averaged with the
  previous and the next validation (only the previous one at the last epoch), as in the paper.
  Runs shorter than 220 epochs use epochs scaled by total/220, moved to the nearest validation.
- VLavg is the mean of the (unsmoothed) validation losses from the VL1 epoch to the VL3 epoch.
- Equal training time: the loss each experiment reaches within the training minutes RAND took to
  reach the VL1-3 epochs (its last validation within that time), the question a user with a
  fixed budget of hours asks. Equal optimiser steps: the same within RAND's steps, which tells
  whether a strategy that falls behind per epoch (DBS: fewer, larger batches) is behind per step.
- Fig. 4 plots the mean curve over seeds (band: min to max) against the epoch, the training
  minutes and the optimiser steps.
- `--variant LABEL=DIR` adds the experiments of another sweep (e.g. one with a learning-rate rule)
  as rows `NAME (LABEL)` of Table 2, of the equal-time and equal-steps tables and of Fig. 4,
  beside the main ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scripts.reproduction import parse_seeds
from scripts.reproduction.fig4 import plot_curves
from scripts.reproduction.table_markdown import markdown
from scripts.reproduction.table_numbers import build


def variants_of(specs: list[str]) -> dict[str, Path]:
    """The --variant options, LABEL=DIR each, as {label: folder}; a bad one is a ValueError saying why."""
    variants = {}
    for spec in specs:
        label, _, where = spec.partition("=")
        if not label or not where or "(" in label or label in variants:
            raise ValueError(
                f"--variant {spec!r} must be LABEL=DIR with a new label without parentheses, "
                "e.g. --variant 'lr sqrt=runs/quality/demo-lr-sqrt'"
            )
        if not Path(where).is_dir():
            raise ValueError(f"--variant {spec!r}: {where} is not a directory")
        variants[label] = Path(where)
    return variants


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "runs_root", type=Path, help="the --out of scripts/reproduction/table2.sh (RUNS_ROOT/EXPERIMENT/seedS per run)"
    )
    parser.add_argument(
        "--out", type=Path, help="where tables.md, tables.json and fig4_val_loss.png go (default: RUNS_ROOT)"
    )
    parser.add_argument(
        "--val-loss",
        choices=("padded", "valid"),
        default="padded",
        help="which validation loss (default padded, the paper's)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="another sweep's root whose experiments join Table 2, the equal-time and "
        "equal-steps tables and Fig. 4 as 'NAME (LABEL)' (repeatable)",
    )
    parser.add_argument(
        "--seeds",
        help="only these seeds, comma-separated (default: every seedS folder), e.g. "
        "to leave out a seed that not every experiment has finished",
    )
    args = parser.parse_args(argv)
    seeds = None if args.seeds is None else parse_seeds(args.seeds)
    if args.seeds is not None and seeds is None:
        print(f"error: --seeds {args.seeds!r} must be comma-separated integers >= 0, e.g. 0,1", file=sys.stderr)
        return 2
    if not args.runs_root.is_dir():
        print(
            f"error: {args.runs_root} is not a directory "
            f"(run scripts/reproduction/table2.sh --out {args.runs_root} first)",
            file=sys.stderr,
        )
        return 2
    try:
        variants = variants_of(args.variant)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = args.out or args.runs_root
    out.mkdir(parents=True, exist_ok=True)
    result = build(args.runs_root, args.val_loss, None if seeds is None else set(seeds), variants)
    text = markdown(result)
    (out / "tables.md").write_text(text)
    (out / "tables.json").write_text(json.dumps(result, indent=2) + "\n")
    plot_curves(result, out / "fig4_val_loss.png")
    print(text + f"\nwrote {out / 'tables.md'}, {out / 'tables.json'}, {out / 'fig4_val_loss.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
