"""Tables 2, 3, 4 and Fig. 4 of the paper from the run directories that scripts/table2.sh wrote.

    python scripts/make_tables.py runs/table2 [--out DIR] [--val-loss padded|valid]

Every number comes from RUN_DIR/<experiment>/metrics.jsonl (plus validate_every from
hparams.json); the paper's own figures are printed beside them, always labelled as the paper's.

- ZPR, ABL and minutes per epoch are means over the run's epochs (train_seconds: training only).
- VL1-3 are the validation losses at epochs 100, 160 and 220 (1-based), each averaged with the
  previous and the next validation (only the previous one at the last epoch), as in the paper.
  Runs shorter than 220 epochs use epochs scaled by total/220, moved to the nearest validation.
- VLavg is the mean of the (unsmoothed) validation losses from the VL1 epoch to the VL3 epoch.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reproduction.paper import (EXPERIMENTS, PAPER_EPOCHS, PAPER_RAND_MIN_PER_EPOCH, PAPER_TABLE2,  # noqa: E402
                                PAPER_TABLE3, PAPER_TABLE4, PAPER_TOTAL_EPOCHS)
from training.rundir import read_hparams, read_metrics  # noqa: E402

DEFAULT_VALIDATE_EVERY = 2  # the paper's, used when a run has no hparams.json


def read_run(run_dir: Path) -> tuple[list[dict], int] | None:
    """(epoch records sorted by epoch, validate_every), or None when the run has no epoch yet."""
    records = read_metrics(run_dir)
    every = (read_hparams(run_dir) or {}).get("validate_every", DEFAULT_VALIDATE_EVERY)
    return (records, int(every)) if records else None


def stage_epochs(total: int, every: int) -> list[int]:
    """The paper's epochs 100/160/220 scaled to a run of `total` epochs, each moved to the nearest
    validated epoch (a multiple of `every`, or the last one; ties go to the later epoch)."""
    validated = sorted(set(range(every, total + 1, every)) | {total})
    return [min(validated, key=lambda v: (abs(v - e * total / PAPER_TOTAL_EPOCHS), -v)) for e in PAPER_EPOCHS]


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def run_row(records: list[dict], stages: list[int], key: str) -> dict:
    """One Table 2 row; a VL cell is None when the run has no validation at that epoch."""
    vals = [(r["epoch"] + 1, r[key]) for r in records if r.get(key) is not None]
    epochs = [e for e, _ in vals]
    losses = [v for _, v in vals]
    smoothed = []
    for stage in stages:
        i = epochs.index(stage) if stage in epochs else None
        smoothed.append(None if i is None else mean(losses[max(i - 1, 0): i + 2]))
    in_range = [v for e, v in vals if stages[0] <= e <= stages[2]]
    return {
        "epochs": records[-1]["epoch"] + 1,
        "zpr": mean([r["zpr"] for r in records]),
        "abl": mean([r["abl"] for r in records]),
        "min_per_epoch": mean([r["train_seconds"] / 60 for r in records]),
        "vl1": smoothed[0], "vl2": smoothed[1], "vl3": smoothed[2],
        "vl_avg": mean(in_range) if smoothed[2] is not None else None,
        "curve": vals,
    }


def reduction(before: float | None, after: float | None) -> float | None:
    """How much smaller `after` is than `before`, in percent of `before`."""
    return None if before is None or after is None else 100 * (before - after) / before


def build(root: Path, val_loss: str) -> dict:
    """Every number of Tables 2-4, the notes that qualify them, and the Fig. 4 curves."""
    runs = {name: read_run(root / name) for name in EXPERIMENTS}
    present = {name: run for name, run in runs.items() if run is not None}
    missing = [name for name in EXPERIMENTS if name not in present]
    total = max((records[-1]["epoch"] + 1 for records, _ in present.values()), default=PAPER_TOTAL_EPOCHS)
    everies = sorted({every for _, every in present.values()}) or [DEFAULT_VALIDATE_EVERY]
    stages = stage_epochs(total, everies[0])
    key = f"val_loss_{val_loss}"
    table2 = {name: run_row(records, stages, key) for name, (records, _) in present.items()}

    rand_min = table2["RAND"]["min_per_epoch"] if "RAND" in table2 else None
    table3 = {}
    for name in EXPERIMENTS:
        if name == "RAND":
            continue
        minutes = table2[name]["min_per_epoch"] if name in table2 else None
        paper = PAPER_TABLE3.get(name, (None, None))
        table3[name] = {"min_saved": None if rand_min is None or minutes is None else rand_min - minutes,
                        "reduction_pct": reduction(rand_min, minutes),
                        "paper_min_saved": paper[0], "paper_reduction_pct": paper[1]}

    vl3 = {name: row["vl3"] for name, row in table2.items()}
    table4 = [{"part": part, "from": a, "to": b, "from_vl3": vl3.get(a), "to_vl3": vl3.get(b),
               "reduction_pct": reduction(vl3.get(a), vl3.get(b)), "paper_reduction_pct": paper}
              for part, pairs in PAPER_TABLE4 for a, b, paper in pairs]

    notes = [f"validation loss: val_loss_{val_loss} ({'the mean over the padded tensor, as in the paper' if val_loss == 'padded' else 'the mean over real frames only'})"]
    if total != PAPER_TOTAL_EPOCHS:
        notes.append(f"runs of {total} epochs, not {PAPER_TOTAL_EPOCHS}: VL1-3 are at epochs {stages} "
                     f"(the paper's {list(PAPER_EPOCHS)} scaled by {total}/{PAPER_TOTAL_EPOCHS}, "
                     f"moved to the nearest validated epoch)")
    if missing:
        notes.append(f"missing runs (no metrics.jsonl under {root}): {', '.join(missing)}; their cells are empty")
    unfinished = {name: row["epochs"] for name, row in table2.items() if row["epochs"] < total}
    if unfinished:
        notes.append("unfinished runs (epochs done): " + ", ".join(f"{n} ({e})" for n, e in unfinished.items()))
    if len(everies) > 1:
        notes.append(f"runs disagree on validate_every ({everies}); the stage epochs use {everies[0]}")
    return {"runs_root": str(root), "val_loss": val_loss, "total_epochs": total, "stage_epochs": stages,
            "validate_every": everies[0], "missing": missing, "unfinished": unfinished, "notes": notes,
            "table2": table2, "table3": table3, "table4": table4,
            "paper": {"table2": PAPER_TABLE2, "rand_min_per_epoch": PAPER_RAND_MIN_PER_EPOCH,
                      "table3": PAPER_TABLE3, "table4": PAPER_TABLE4}}


def cell(value: float | int | None, digits: int, spec: str = "f") -> str:
    """A number with `digits` decimals (spec f) or significant digits (spec g); empty when missing."""
    return "" if value is None else f"{value:.{digits}{spec}}"


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def markdown(result: dict) -> str:
    e1, e2, e3 = result["stage_epochs"]
    out = ["# Tables 2-4 (measured) and the paper's", ""] + [f"- {note}" for note in result["notes"]] + [""]
    out += ["## Table 2: efficiency and validation loss (measured)", ""]
    rows = []
    for name in EXPERIMENTS:
        row = result["table2"].get(name)
        rows.append([name] + ([""] * 8 if row is None else [
            str(row["epochs"]), cell(row["zpr"], 2), cell(row["abl"], 2), cell(row["min_per_epoch"], 4, "g"),
            cell(row["vl1"], 4), cell(row["vl2"], 4), cell(row["vl3"], 4), cell(row["vl_avg"], 4)]))
    out += markdown_table(["Batching", "epochs", "ZPR %", "ABL", "min./ep.", f"VL1 (ep. {e1})", f"VL2 (ep. {e2})",
                           f"VL3 (ep. {e3})", f"VLavg (ep. {e1}-{e3})"], rows)
    out += ["", "## Table 2 as published (GTX 1080, 220 epochs; epochs 100/160/220)", ""]
    out += markdown_table(["Batching", "ZPR %", "ABL", "VL1", "VL2", "VL3", "VLavg"],
                          [[name, cell(r["zpr"], 2), cell(r["abl"], 2)] + [cell(r[k], 3) for k in ("vl1", "vl2", "vl3", "vl_avg")]
                           for name, r in PAPER_TABLE2.items()])
    out += ["", f"## Table 3: time reduction against RAND (measured; paper beside, RAND {PAPER_RAND_MIN_PER_EPOCH} min./ep.)", ""]
    out += markdown_table(["Batching", "min./ep. saved", "reduction %", "paper min./ep. saved", "paper reduction %"],
                          [[name, cell(r["min_saved"], 4, "g"), cell(r["reduction_pct"], 2), cell(r["paper_min_saved"], 2),
                            cell(r["paper_reduction_pct"], 2)] for name, r in result["table3"].items()])
    out += ["", f"## Table 4: A/B comparisons of VL3 (ep. {e3}; measured, paper's reduction beside)", ""]
    rows = []
    for part, _ in PAPER_TABLE4:
        rows.append([f"**{part}**", "", "", "", "", ""])
        rows += [[r["from"], cell(r["from_vl3"], 4), r["to"], cell(r["to_vl3"], 4), cell(r["reduction_pct"], 2),
                  cell(r["paper_reduction_pct"], 2)] for r in result["table4"] if r["part"] == part]
    out += markdown_table(["From", "VL3", "To", "VL3", "reduction %", "paper reduction %"], rows)
    return "\n".join(out) + "\n"


def plot_curves(result: dict, png: Path) -> None:
    """Fig. 4: the validation loss of every run against the epoch, the VL epochs marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, row in result["table2"].items():
        if row["curve"]:
            epochs, losses = zip(*row["curve"])
            ax.plot(epochs, losses, label=name, marker="." if len(epochs) < 30 else None)
    for stage in result["stage_epochs"]:
        ax.axvline(stage, color="grey", linestyle=":", linewidth=1)
    ax.set(xlabel="epoch", ylabel=f"validation loss ({result['val_loss']})",
           title="Fig. 4: validation loss (RAND batches for every run)")
    if result["table2"]:
        ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs_root", type=Path, help="the --out of scripts/table2.sh (one folder per experiment)")
    parser.add_argument("--out", type=Path, help="where tables.md, tables.json and fig4_val_loss.png go "
                                                 "(default: RUNS_ROOT)")
    parser.add_argument("--val-loss", choices=("padded", "valid"), default="padded",
                        help="which validation loss (default padded, the paper's)")
    args = parser.parse_args(argv)
    if not args.runs_root.is_dir():
        print(f"error: {args.runs_root} is not a directory (run scripts/table2.sh --out {args.runs_root} first)",
              file=sys.stderr)
        return 2
    out = args.out or args.runs_root
    out.mkdir(parents=True, exist_ok=True)
    result = build(args.runs_root, args.val_loss)
    text = markdown(result)
    (out / "tables.md").write_text(text)
    (out / "tables.json").write_text(json.dumps(result, indent=2) + "\n")
    plot_curves(result, out / "fig4_val_loss.png")
    print(text + f"\nwrote {out / 'tables.md'}, {out / 'tables.json'}, {out / 'fig4_val_loss.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
