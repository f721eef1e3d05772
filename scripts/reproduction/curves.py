"""What the reproduction's reports share: means and spreads over seeds, the loss a run reached
within a budget of minutes or steps, and table cells (make_tables.py and compare_sweeps.py)."""

from __future__ import annotations

import math


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def sample_sd(values: list[float]) -> float | None:
    """The spread over seeds: the sample standard deviation (None for fewer than two)."""
    if len(values) < 2:
        return None
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def spread(values: list[float | None]) -> tuple[float | None, float | None]:
    """(mean, sample sd) over seeds; (None, None) unless every seed has a value."""
    if not values or None in values:
        return None, None
    return mean(values), sample_sd(values)


def loss_within(row: dict, budget: float, total: int, measure: str = "minutes") -> tuple[int, float] | None:
    """(epoch, loss) of a seed's last validation reached within `budget` (of training minutes or
    steps, the curve's `measure`); None when it has none that early, when the run is unfinished
    and has not yet trained that long, or when its records lack the measure."""
    curve = row["curve"]
    if not curve or any(p[measure] is None for p in curve) or (row["epochs"] < total and curve[-1][measure] < budget):
        return None
    reached = [(p["epoch"], p["loss"]) for p in curve if p[measure] <= budget * (1 + 1e-9)]
    return reached[-1] if reached else None


def cell(value: float | int | None, digits: int, spec: str = "f") -> str:
    """A number with `digits` decimals (spec f) or significant digits (spec g); empty when missing."""
    return "" if value is None else f"{value:.{digits}{spec}}"


def cell_sd(value: float | None, sd: float | None, digits: int) -> str:
    """`mean ± sd` over seeds, or the mean alone (one seed), or empty."""
    return cell(value, digits) + ("" if value is None or sd is None else f" ± {sd:.{digits}f}")
