"""`python -m scripts.reproduction plan ...`: what table2.sh should run, one line per experiment.

Each line is `NAME<TAB>SEED<TAB>ACTION<TAB>RUN_DIR<TAB>HPARAMS`, ACTION being done (metrics.jsonl
has the last epoch), resume (a checkpoint exists) or new; one run directory per experiment and
seed, ROOT/NAME/seedS. The shell script stays a thin loop; the decisions live here, next to the
experiment table, where they can be tested.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from batching.options import parse_overrides
from training.hparams import RESUME_MAY_CHANGE
from training.rundir import has_checkpoint, last_epoch

from . import parse_seeds
from .paper import EXPERIMENTS, FIXED_HPARAMS, SSB_VARIANT_KEYS, experiment_hparams


def run_dir_of(root: Path, name: str, seed: int) -> Path:
    return root / name / f"seed{seed}"


def plan(
    names: list[str], seeds: list[int], root: Path, dataset: str, epochs: int, extra: str
) -> list[tuple[str, int, str, Path, str]]:
    """(name, seed, action, run dir, hparams) per experiment and seed, seeds outermost (a stopped
    sweep then has whole seeds done); extras override the fixed settings but never the
    experiment's own batching keys or the seed, so a typo cannot turn SB-BR into something else,
    except an SSB variant's key and target (paper.experiment_hparams)."""
    rows = []
    for seed, name in ((s, n) for s in seeds for n in names):
        run_dir = run_dir_of(root, name, seed)
        if last_epoch(run_dir) >= epochs - 1:
            action, hp = "done", {}
        elif has_checkpoint(run_dir):
            action = "resume"  # a resumed run accepts only RESUME_MAY_CHANGE
            hp = {k: v for k, v in parse_overrides(extra).items() if k in RESUME_MAY_CHANGE} | {"epochs": str(epochs)}
        else:
            action = "new"
            extras = parse_overrides(extra)
            hp = {
                "dataset": dataset,
                **FIXED_HPARAMS,
                "epochs": str(epochs),
                **{k: v for k, v in extras.items() if k not in SSB_VARIANT_KEYS},
                **experiment_hparams(name, extras),
                "seed": str(seed),
                "output_dir": str(run_dir),
            }
        rows.append((name, seed, action, run_dir, ",".join(f"{k}={v}" for k, v in hp.items())))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.reproduction", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("names", help="the experiment names, in Table 2's order")
    p = sub.add_parser("plan", help="one line per experiment: NAME, ACTION, RUN_DIR, HPARAMS")
    p.add_argument("--root", type=Path, required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--only", default="all", help="comma-separated experiment names, or all")
    p.add_argument("--seeds", default="0", help="comma-separated seeds, e.g. 0,1,2 (default 0, the paper's)")
    p.add_argument("--extra", default="", help="extra key=value hparams for new runs")
    args = parser.parse_args(argv)
    if args.command == "names":
        print("\n".join(EXPERIMENTS))
        return 0
    names = list(EXPERIMENTS) if args.only == "all" else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in EXPERIMENTS]
    seeds = parse_seeds(args.seeds)
    problem = (
        f"unknown experiment(s) {', '.join(unknown)}; known: {', '.join(EXPERIMENTS)}"
        if unknown
        else f"--epochs {args.epochs} must be >= 1"
        if args.epochs < 1
        else f"--seeds {args.seeds!r} must be comma-separated integers >= 0, e.g. 0,1,2"
        if seeds is None
        else None
    )
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    for name, seed, action, run_dir, hp in plan(names, seeds, args.root, args.dataset, args.epochs, args.extra):
        print(f"{name}\t{seed}\t{action}\t{run_dir}\t{hp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
