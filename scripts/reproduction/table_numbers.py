"""The numbers of Tables 2-4, the equal-time and equal-steps tables and the Fig. 4 curves, read from
the runs that scripts/reproduction/table2.sh wrote (make_tables.py's docstring says how each is
measured)."""

from __future__ import annotations

from pathlib import Path

from scripts.reproduction.curves import loss_within, mean, spread
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
