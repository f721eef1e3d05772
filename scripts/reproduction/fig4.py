"""Fig. 4 of the paper from the measured curves: validation loss against epochs, training minutes
and optimiser steps (make_tables.py writes it to fig4_val_loss.png)."""

from __future__ import annotations

from pathlib import Path

from scripts.reproduction.paper import (
    EXPERIMENTS,
)

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
