"""The graphed part: the demo on the graphed decoder loop beside the same run eager."""

from __future__ import annotations

from .checks import Check, Setup, training_check


def graphed_part(setup: Setup) -> list[Check]:
    """The same demo run with the decoder loop eager and graphed: per-epoch losses within 1e-3."""
    bucket = 16 if setup.tiny else 64
    runs = {}
    checks = []
    for label, graphs in (("eager", "false"), ("graphed", "true")):
        name = f"graphed-{label}"
        check = training_check(setup, "graphed", name, f"fast_decoder=true,graph_bucket={bucket},cuda_graphs={graphs}")
        runs[label] = check.figures.get("train_loss", [])
        checks.append(check)
    pairs = list(zip(runs["eager"], runs["graphed"]))
    worst = max((abs(a - b) / abs(a) for a, b in pairs if a and b), default=float("inf"))
    ok = bool(pairs) and len(runs["eager"]) == len(runs["graphed"]) and worst < 1e-3
    checks.append(
        Check(
            "graphed",
            "graphed-tracks-eager",
            ok,
            0.0,
            f"largest relative difference of the per-epoch training losses {worst:.2e}",
            {"eager": runs["eager"], "graphed": runs["graphed"]},
        )
    )
    return checks
