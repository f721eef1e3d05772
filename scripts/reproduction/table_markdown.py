"""Tables 2-4, the equal-time and equal-steps tables as Markdown, the paper's figures beside the
measured ones (make_tables.py writes them to tables.md)."""

from __future__ import annotations

from scripts.common import markdown_table
from scripts.reproduction.curves import cell, cell_sd
from scripts.reproduction.paper import (
    EXPERIMENTS,
    PAPER_RAND_MIN_PER_EPOCH,
    PAPER_TABLE2,
    PAPER_TABLE4,
)


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
