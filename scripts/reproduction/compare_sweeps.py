"""Two sweeps side by side from their saved tables (make_tables's tables.json): the validation loss
each experiment reaches at the same epochs and within the same optimiser steps, mean ± sd over seeds.

    python -m scripts.reproduction.compare_sweeps BASE/tables.json LABEL=OTHER/tables.json \
        [--epochs 8,16,24] [--only RAND,SSB-DBS-BR]

Why: a published sweep keeps every seed's validation curve in its tables.json, so a new arm (another
key, another learning-rate rule) can be compared with it without training the old arm again. That is
fair only when training is deterministic on the code that runs the new arm: re-run a few epochs of
one old run and check its losses match the saved curve before trusting the comparison.

- At equal epochs: the mean of the validation at that epoch and the one before it (a trailing mean,
  so a sweep that stops at that epoch is smoothed like one that goes on).
- Within equal steps: each seed's last validation within the optimiser steps that BASE's RAND
  needed for that epoch (make_tables's rule); empty when a seed stopped before that many steps.
The epochs default to the base's stage epochs that every sweep reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scripts.common import markdown_table
from scripts.reproduction.curves import cell, cell_sd, loss_within, mean, spread


def trailing_loss(curve: list[dict], epoch: int) -> float | None:
    """The validation loss at `epoch` averaged with the validation before it; None without one there."""
    epochs = [p["epoch"] for p in curve]
    if epoch not in epochs:
        return None
    i = epochs.index(epoch)
    return mean([p["loss"] for p in curve[max(i - 1, 0) : i + 1]])


def within_steps(seed_row: dict, budget: float | None) -> float | None:
    """A seed's last validation within `budget` steps; None when it never trained that long."""
    curve = seed_row["curve"]
    if budget is None or not curve or curve[-1]["steps"] is None or curve[-1]["steps"] < budget * (1 - 1e-9):
        return None
    hit = loss_within(seed_row, budget, seed_row["epochs"], "steps")
    return None if hit is None else hit[1]


def compare(sweeps: dict[str, dict], epochs: list[int], only: list[str] | None) -> dict:
    """Rows `NAME (LABEL)` of every sweep's experiments (those in `only` when given) at `epochs`,
    with the step budgets taken from the first sweep's RAND."""
    base = next(iter(sweeps.values()))
    rand = {p["epoch"]: p["steps"] for p in base["table2"].get("RAND", {}).get("curve", [])}
    budgets = [rand.get(e) for e in epochs]
    rows = {}
    for label, sweep in sweeps.items():
        for name, row in sweep["table2"].items():
            if only and name not in only:
                continue
            seeds = list(row["per_seed"].values())
            steps = [s["curve"][-1]["steps"] / s["epochs"] for s in seeds if s["curve"] and s["curve"][-1]["steps"]]
            rows[f"{name} ({label})"] = {
                "seeds": len(seeds),
                "zpr": row["zpr"],
                "steps_per_epoch": mean(steps),
                "at_epoch": [spread([trailing_loss(s["curve"], e) for s in seeds]) for e in epochs],
                "within_steps": [spread([within_steps(s, b) for s in seeds]) for b in budgets],
            }
    return {"epochs": epochs, "step_budgets": budgets, "val_loss": base["val_loss"], "rows": rows}


def markdown(result: dict) -> str:
    epochs, budgets = result["epochs"], result["step_budgets"]
    steps = any(b is not None for b in budgets)  # the base has a RAND to take budgets from
    head = (
        ["Batching", "seeds", "ZPR %", "steps/epoch"]
        + [f"epoch {e}" for e in epochs]
        + ([f"within {cell(b, 0)} steps" for b in budgets] if steps else [])
    )
    body = [
        [name, str(r["seeds"]), cell(r["zpr"], 2), cell(r["steps_per_epoch"], 1)]
        + [cell_sd(m, sd, 3) for m, sd in r["at_epoch"]]
        + ([cell_sd(m, sd, 3) for m, sd in r["within_steps"]] if steps else [])
        for name, r in result["rows"].items()
    ]
    within = (
        "within steps: the last validation within the steps the first sweep's RAND needed for that epoch"
        if steps
        else "no equal-steps columns: the first sweep has no RAND to take the step budgets from"
    )
    return (
        f"Validation loss `{result['val_loss']}`, mean ± sample sd over seeds; at an epoch: the mean of that "
        f"validation and the one before; {within}.\n\n" + "\n".join(markdown_table(head, body))
    )


def parse_sweep(spec: str) -> tuple[str, Path]:
    label, sep, where = spec.rpartition("=")
    return (label, Path(where)) if sep and label else (Path(spec).parent.name, Path(spec))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "sweeps",
        nargs="+",
        metavar="[LABEL=]TABLES_JSON",
        help="make_tables's tables.json of each sweep; the first is the base (its RAND sets the step budgets)",
    )
    parser.add_argument(
        "--epochs", help="comma-separated epochs (default: the base's stage epochs every sweep reached)"
    )
    parser.add_argument("--only", help="comma-separated experiments to show (default: all)")
    args = parser.parse_args(argv)
    sweeps = {}
    for spec in args.sweeps:
        label, path = parse_sweep(spec)
        try:
            sweeps[label] = json.loads(path.read_text())
            sweeps[label]["table2"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            print(
                f"error: {path} is not a tables.json that make_tables wrote ({err}); run "
                "python -m scripts.reproduction.make_tables RUNS_ROOT --out DIR first",
                file=sys.stderr,
            )
            return 2
    if len(sweeps) < 2:
        print(
            "error: give two or more sweeps with distinct labels, e.g. base=a/tables.json cost=b/tables.json",
            file=sys.stderr,
        )
        return 2
    reached = min(s["total_epochs"] for s in sweeps.values())
    try:
        epochs = (
            [int(e) for e in args.epochs.split(",")]
            if args.epochs
            else [e for e in next(iter(sweeps.values()))["stage_epochs"] if e <= reached]
        )
    except ValueError:
        print(f"error: --epochs {args.epochs!r} must be comma-separated integers, e.g. 8,16,24", file=sys.stderr)
        return 2
    only = args.only.split(",") if args.only else None
    print(markdown(compare(sweeps, epochs, only)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
