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

from scripts.common import markdown_table
from scripts.reproduction import parse_seeds
from scripts.reproduction.curves import cell, cell_sd, loss_within, mean, spread
from scripts.reproduction.paper import (
    EXPERIMENTS,
    PAPER_EPOCHS,
    PAPER_RAND_MIN_PER_EPOCH,
    PAPER_TABLE2,
    PAPER_TABLE3,
    PAPER_TABLE4,
    PAPER_TOTAL_EPOCHS,
)
from training.rundir import read_hparams, read_metrics

DEFAULT_VALIDATE_EVERY = 2  # the paper's, used when a run has no hparams.json
ROW_COLUMNS = ("zpr", "abl", "min_per_epoch", "vl1", "vl2", "vl3", "vl_avg")


def read_run(run_dir: Path) -> tuple[list[dict], int] | None:
    """(epoch records sorted by epoch, validate_every), or None when the run has no epoch yet."""
    records = read_metrics(run_dir)
    every = (read_hparams(run_dir) or {}).get("validate_every", DEFAULT_VALIDATE_EVERY)
    return (records, int(every)) if records else None


def read_seeds(experiment_dir: Path, seeds: set[int] | None = None) -> dict[int, tuple[list[dict], int]]:
    """seed -> read_run() for every experiment_dir/seedS that has an epoch (table2.sh's layout),
    only the given seeds when `seeds` is set."""
    runs = {}
    for path in sorted(experiment_dir.glob("seed*")):
        if not path.name[4:].isdigit() or (seeds is not None and int(path.name[4:]) not in seeds):
            continue
        if (run := read_run(path)) is not None:
            runs[int(path.name[4:])] = run
    return dict(sorted(runs.items()))


def stage_epochs(total: int, every: int) -> list[int]:
    """The paper's epochs 100/160/220 scaled to a run of `total` epochs, each moved to the nearest
    validated epoch (a multiple of `every`, or the last one; ties go to the later epoch)."""
    validated = sorted(set(range(every, total + 1, every)) | {total})
    return [min(validated, key=lambda v: (abs(v - e * total / PAPER_TOTAL_EPOCHS), -v)) for e in PAPER_EPOCHS]


def run_row(records: list[dict], stages: list[int], key: str) -> dict:
    """One seed's Table 2 row; a VL cell is None when the run has no validation at that epoch.
    `curve` has one point per validation: epoch, loss, and the training minutes and steps up to
    and including that epoch (steps None when a record predates the `steps` field)."""
    minutes = {r["epoch"] + 1: r["train_seconds"] / 60 for r in records}
    steps = {r["epoch"] + 1: r.get("steps") for r in records}
    vals = [(r["epoch"] + 1, r[key]) for r in records if r.get(key) is not None]
    epochs = [e for e, _ in vals]
    losses = [v for _, v in vals]
    smoothed = []
    for stage in stages:
        i = epochs.index(stage) if stage in epochs else None
        smoothed.append(None if i is None else mean(losses[max(i - 1, 0) : i + 2]))
    in_range = [v for e, v in vals if stages[0] <= e <= stages[2]]
    return {
        "epochs": records[-1]["epoch"] + 1,
        "zpr": mean([r["zpr"] for r in records]),
        "abl": mean([r["abl"] for r in records]),
        "min_per_epoch": mean(list(minutes.values())),
        "vl1": smoothed[0],
        "vl2": smoothed[1],
        "vl3": smoothed[2],
        "vl_avg": mean(in_range) if smoothed[2] is not None else None,
        "curve": [
            {
                "epoch": e,
                "loss": v,
                "minutes": sum(m for k, m in minutes.items() if k <= e),
                "steps": cumulative(steps, e),
            }
            for e, v in vals
        ],
    }


def cumulative(per_epoch: dict[int, int | None], epoch: int) -> int | None:
    """The sum over epochs 1..epoch, or None when any of them is unknown."""
    values = [v for k, v in per_epoch.items() if k <= epoch]
    return None if None in values else sum(values)


def over_seeds(rows: dict[int, dict]) -> dict:
    """One experiment's row: each column's mean over the seeds (None unless every seed has it),
    the sample standard deviation of the VL columns (`*_sd`), the seeds' own rows, and the mean
    curve over the validations that every seed has (loss: mean, low/high: min/max, minutes and
    steps: means)."""
    out: dict = {"epochs": min(r["epochs"] for r in rows.values()), "seeds": list(rows), "per_seed": rows}
    for col in ROW_COLUMNS:
        out[col], sd = spread([r[col] for r in rows.values()])
        if col.startswith("vl"):
            out[col + "_sd"] = sd
    points = [{point["epoch"]: point for point in r["curve"]} for r in rows.values()]
    common = sorted(set.intersection(*(set(p) for p in points)))
    out["curve"] = []
    for e in common:
        losses, steps = [p[e]["loss"] for p in points], [p[e]["steps"] for p in points]
        out["curve"].append(
            {
                "epoch": e,
                "loss": mean(losses),
                "low": min(losses),
                "high": max(losses),
                "minutes": mean([p[e]["minutes"] for p in points]),
                "steps": None if None in steps else mean(steps),
            }
        )
    return out


def equal_budget(table2: dict, stages: list[int], total: int, measure: str) -> dict:
    """The validation loss each experiment reaches within the training minutes or steps
    (`measure`) RAND needed for the stage epochs (mean and spread over seeds; None when a seed has
    no validation that early, or is unfinished and has not trained that long yet). A finished run
    that needed less shows its last validation."""
    rand = {p["epoch"]: p[measure] for p in table2["RAND"]["curve"]} if "RAND" in table2 else {}
    budgets = [rand.get(stage) for stage in stages]
    out = {"measure": measure, "budgets": budgets, "rows": {}}
    for name, row in table2.items():
        cells = []
        for budget in budgets:
            hits = [
                None if budget is None else loss_within(seed, budget, total, measure)
                for seed in row["per_seed"].values()
            ]
            loss, sd = spread([None if h is None else h[1] for h in hits])
            cells.append({"loss": loss, "sd": sd, "epoch": spread([None if h is None else h[0] for h in hits])[0]})
        out["rows"][name] = cells
    return out


def reduction(before: float | None, after: float | None) -> float | None:
    """How much smaller `after` is than `before`, in percent of `before`."""
    return None if before is None or after is None else 100 * (before - after) / before


def variant_name(name: str, label: str) -> str:
    return f"{name} ({label})"


def read_experiments(
    root: Path, variants: dict[str, Path], seeds: set[int] | None
) -> tuple[dict[str, dict], list[str], list[str]]:
    """(name -> read_seeds() for every experiment with a run, the main experiments without any,
    the variants without any), the variants' experiments named `NAME (LABEL)`."""
    runs = {name: read_seeds(root / name, seeds) for name in EXPERIMENTS}
    present = {name: found for name, found in runs.items() if found}
    missing = [name for name in EXPERIMENTS if name not in present]
    empty_variants = []
    for label, variant_root in variants.items():
        found = {variant_name(name, label): read_seeds(variant_root / name, seeds) for name in EXPERIMENTS}
        present |= {name: runs for name, runs in found.items() if runs}
        if not any(found.values()):
            empty_variants.append(f"{label} ({variant_root})")
    return present, missing, empty_variants


def table3_of(table2: dict) -> dict:
    """Table 3: each experiment's minutes saved per epoch against RAND, and the paper's."""
    rand_min = table2["RAND"]["min_per_epoch"] if "RAND" in table2 else None
    table3 = {}
    for name in EXPERIMENTS:
        if name == "RAND":
            continue
        minutes = table2[name]["min_per_epoch"] if name in table2 else None
        paper = PAPER_TABLE3.get(name, (None, None))
        table3[name] = {
            "min_saved": None if rand_min is None or minutes is None else rand_min - minutes,
            "reduction_pct": reduction(rand_min, minutes),
            "paper_min_saved": paper[0],
            "paper_reduction_pct": paper[1],
        }
    return table3


def table4_of(table2: dict) -> list[dict]:
    """Table 4: the VL3 reduction of each of the paper's pairs of experiments, and the paper's."""
    vl3 = {name: row["vl3"] for name, row in table2.items()}
    return [
        {
            "part": part,
            "from": a,
            "to": b,
            "from_vl3": vl3.get(a),
            "to_vl3": vl3.get(b),
            "reduction_pct": reduction(vl3.get(a), vl3.get(b)),
            "paper_reduction_pct": paper,
        }
        for part, pairs in PAPER_TABLE4
        for a, b, paper in pairs
    ]


def sweep_notes(val_loss: str, table2: dict, total: int, stages: list[int]) -> list[str]:
    """The notes that qualify every table: which validation loss, how many seeds, and the epochs of
    VL1-3 when the runs are shorter or longer than the paper's."""
    kind = (
        "the mean over the padded tensor, as in the paper" if val_loss == "padded" else "the mean over real frames only"
    )
    seed_counts = sorted({len(row["seeds"]) for row in table2.values()})
    notes = [
        f"validation loss: val_loss_{val_loss} ({kind})",
        f"seeds per experiment: {', '.join(map(str, seed_counts)) or 'none'}; a cell is the mean over the seeds, "
        "± their sample standard deviation when there are two or more",
    ]
    if total != PAPER_TOTAL_EPOCHS:
        notes.append(
            f"runs of {total} epochs, not {PAPER_TOTAL_EPOCHS}: VL1-3 are at epochs {stages} "
            f"(the paper's {list(PAPER_EPOCHS)} scaled by {total}/{PAPER_TOTAL_EPOCHS}, "
            f"moved to the nearest validated epoch)"
        )
    return notes


def build(root: Path, val_loss: str, seeds: set[int] | None = None, variants: dict[str, Path] | None = None) -> dict:
    """Every number of Tables 2-4 (means over seeds), the equal-time table, the notes that
    qualify them, and the Fig. 4 curves; only the given seeds when `seeds` is set. Each variant
    (label -> another sweep's root) adds its experiments as rows `NAME (LABEL)`."""
    variants = variants or {}
    present, missing, empty_variants = read_experiments(root, variants, seeds)
    finals = [records[-1]["epoch"] + 1 for seeds in present.values() for records, _ in seeds.values()]
    total = max(finals, default=PAPER_TOTAL_EPOCHS)
    everies = sorted({every for seeds in present.values() for _, every in seeds.values()}) or [DEFAULT_VALIDATE_EVERY]
    stages = stage_epochs(total, everies[0])
    key = f"val_loss_{val_loss}"
    table2 = {
        name: over_seeds({seed: run_row(records, stages, key) for seed, (records, _) in seeds.items()})
        for name, seeds in present.items()
    }

    table3, table4 = table3_of(table2), table4_of(table2)
    notes = sweep_notes(val_loss, table2, total, stages)
    if missing:
        notes.append(
            f"missing runs (no metrics.jsonl under {root}/NAME/seedS): {', '.join(missing)}; their cells are empty"
        )
    if empty_variants:
        notes.append(f"variants without any run: {', '.join(empty_variants)}")
    unfinished = {
        f"{name}/seed{seed}": row["epochs"]
        for name, t in table2.items()
        for seed, row in t["per_seed"].items()
        if row["epochs"] < total
    }
    if unfinished:
        notes.append("unfinished runs (epochs done): " + ", ".join(f"{n} ({e})" for n, e in unfinished.items()))
    if len(everies) > 1:
        notes.append(f"runs disagree on validate_every ({everies}); the stage epochs use {everies[0]}")
    return {
        "runs_root": str(root),
        "variants": {k: str(v) for k, v in variants.items()},
        "val_loss": val_loss,
        "total_epochs": total,
        "stage_epochs": stages,
        "validate_every": everies[0],
        "missing": missing,
        "unfinished": unfinished,
        "notes": notes,
        "table2": table2,
        "table3": table3,
        "table4": table4,
        "equal_time": equal_budget(table2, stages, total, "minutes"),
        "equal_steps": equal_budget(table2, stages, total, "steps"),
        "paper": {
            "table2": PAPER_TABLE2,
            "rand_min_per_epoch": PAPER_RAND_MIN_PER_EPOCH,
            "table3": PAPER_TABLE3,
            "table4": PAPER_TABLE4,
        },
    }


def markdown(result: dict) -> str:
    out = ["# Tables 2-4 (measured) and the paper's", ""] + [f"- {note}" for note in result["notes"]] + [""]
    out += table2_markdown(result)
    out += ["", "## Table 2 as published (GTX 1080, 220 epochs; epochs 100/160/220)", ""]
    out += markdown_table(
        ["Batching", "ZPR %", "ABL", "VL1", "VL2", "VL3", "VLavg"],
        [
            [name, cell(r["zpr"], 2), cell(r["abl"], 2)] + [cell(r[k], 3) for k in ("vl1", "vl2", "vl3", "vl_avg")]
            for name, r in PAPER_TABLE2.items()
        ],
    )
    out += [
        "",
        f"## Table 3: time reduction against RAND (measured; paper beside, RAND {PAPER_RAND_MIN_PER_EPOCH} min./ep.)",
        "",
    ]
    out += markdown_table(
        ["Batching", "min./ep. saved", "reduction %", "paper min./ep. saved", "paper reduction %"],
        [
            [
                name,
                cell(r["min_saved"], 4, "g"),
                cell(r["reduction_pct"], 2),
                cell(r["paper_min_saved"], 2),
                cell(r["paper_reduction_pct"], 2),
            ]
            for name, r in result["table3"].items()
        ],
    )
    out += table4_markdown(result)
    out += equal_budget_markdown(
        result,
        "equal_time",
        "Equal training time: validation loss within RAND's training minutes at its VL1-3 epochs",
        "{:.3g} min",
    )
    out += equal_budget_markdown(
        result,
        "equal_steps",
        "Equal optimiser steps: validation loss within RAND's steps at its VL1-3 epochs",
        "{:.0f} steps",
    )
    return "\n".join(out) + "\n"


def table2_markdown(result: dict) -> list[str]:
    """Table 2's section: every experiment (the paper's first, then a variant's rows), empty where it did not run."""
    e1, e2, e3 = result["stage_epochs"]
    rows = []
    extra = [name for name in result["table2"] if name not in EXPERIMENTS]
    for name in list(EXPERIMENTS) + extra:
        row = result["table2"].get(name)
        rows.append(
            [name]
            + (
                [""] * 8
                if row is None
                else [
                    str(row["epochs"]),
                    cell(row["zpr"], 2),
                    cell(row["abl"], 2),
                    cell(row["min_per_epoch"], 4, "g"),
                    *(cell_sd(row[k], row[k + "_sd"], 4) for k in ("vl1", "vl2", "vl3", "vl_avg")),
                ]
            )
        )
    return [
        "## Table 2: efficiency and validation loss (measured)",
        "",
        *markdown_table(
            [
                "Batching",
                "epochs",
                "ZPR %",
                "ABL",
                "min./ep.",
                f"VL1 (ep. {e1})",
                f"VL2 (ep. {e2})",
                f"VL3 (ep. {e3})",
                f"VLavg (ep. {e1}-{e3})",
            ],
            rows,
        ),
    ]


def table4_markdown(result: dict) -> list[str]:
    """Table 4's section: the paper's A/B pairs under their part's heading row."""
    rows = []
    for part, _ in PAPER_TABLE4:
        rows.append([f"**{part}**", "", "", "", "", ""])
        rows += [
            [
                r["from"],
                cell(r["from_vl3"], 4),
                r["to"],
                cell(r["to_vl3"], 4),
                cell(r["reduction_pct"], 2),
                cell(r["paper_reduction_pct"], 2),
            ]
            for r in result["table4"]
            if r["part"] == part
        ]
    return [
        "",
        f"## Table 4: A/B comparisons of VL3 (ep. {result['stage_epochs'][2]}; measured, paper's reduction beside)",
        "",
        *markdown_table(["From", "VL3", "To", "VL3", "reduction %", "paper reduction %"], rows),
    ]


def equal_budget_markdown(result: dict, key: str, title: str, budget_format: str) -> list[str]:
    """An equal-budget table: loss (and the epoch reached) within RAND's minutes or steps."""
    same = result[key]
    budgets = same["budgets"]
    out = ["", f"## {title}", ""]
    if None in budgets:
        return out + [f"(needs RAND's validations at the VL1-3 epochs and its {same['measure']})"]
    header = ["Batching"] + [
        f"within {budget_format.format(b)} (RAND ep. {e})" for b, e in zip(budgets, result["stage_epochs"])
    ]
    rows = [
        [name]
        + [cell_sd(c["loss"], c["sd"], 4) + ("" if c["epoch"] is None else f" (ep. {c['epoch']:.3g})") for c in cells]
        for name, cells in same["rows"].items()
    ]
    return out + markdown_table(header, rows)


PANELS = (
    ("epoch", "epoch", "Fig. 4: validation loss against epochs"),
    ("minutes", "training minutes (validation excluded)", "... against training time"),
    ("steps", "optimiser steps", "... and against optimiser steps"),
)


def plot_curves(result: dict, png: Path) -> None:
    """Fig. 4: each experiment's mean validation loss over seeds (band: min to max) against the
    epoch (the VL epochs marked), the training minutes and the optimiser steps (a panel is left
    out when some run lacks its measure); variants dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    curves = {name: row for name, row in result["table2"].items() if row["curve"]}
    panels = [
        panel
        for panel in PANELS
        if all(point[panel[0]] is not None for row in curves.values() for point in row["curve"])
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), sharey=True, squeeze=False)
    for ax, (measure, xlabel, title) in zip(axes[0], panels):
        for name, row in curves.items():
            x = [point[measure] for point in row["curve"]]
            style = {"marker": "." if len(x) < 30 else None, "linestyle": "-" if name in EXPERIMENTS else "--"}
            (line,) = ax.plot(x, [point["loss"] for point in row["curve"]], label=name, **style)
            if len(row["seeds"]) > 1:
                ax.fill_between(
                    x,
                    [point["low"] for point in row["curve"]],
                    [point["high"] for point in row["curve"]],
                    color=line.get_color(),
                    alpha=0.15,
                    linewidth=0,
                )
        ax.set(xlabel=xlabel, title=title)
    for stage in result["stage_epochs"]:
        axes[0][0].axvline(stage, color="grey", linestyle=":", linewidth=1)
    axes[0][0].set_yscale("log")  # shared: the early losses would flatten the end, which matters most
    for which in ("major", "minor"):  # plain numbers, not 3 x 10^1
        getattr(axes[0][0].yaxis, f"set_{which}_formatter")(ScalarFormatter())
    axes[0][0].set_ylabel(f"validation loss ({result['val_loss']}, log scale)")
    if curves:
        axes[0][0].legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


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
