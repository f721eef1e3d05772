"""The paper's experiments (Section 6) as train.py hparams, and its published Tables 2-4.

Ge et al., "Speed up training with variable length inputs by efficient batching strategies",
Interspeech 2021. Numbers are copied from the paper so reports can print them beside ours.
"""

from __future__ import annotations

from batching.options import NONE_WORDS
from batching.strategies import STRATEGY_TABLE

#: The paper's fixed settings: B0 = 16, fp32, validation every 2 epochs, and NVIDIA's loss (the
#: mean over the padded tensor). The seed (the paper's 0, +1 per epoch) comes from table2.sh --seeds.
FIXED_HPARAMS = {"batch_size": "16", "amp": "off", "validate_every": "2", "loss_norm": "padded"}

#: Table 1 parameters: SSB LRF 0.1, BKT bucket size 1024, ATS 58 bins.
_TABLE1 = {"lrf": "0.1", "bucket_size": "1024", "n_bins": "58"}


def _has_ssb_key(batching: str) -> bool:
    return "ssb_key" in STRATEGY_TABLE[batching].options


def _exp(batching: str, dbs: bool = False, br: bool = False) -> dict[str, str]:
    """SSB's rows pin the paper's key (the recipe's default is the cost key calibrated to a ZPR)."""
    key = {"ssb_key": "length"} if _has_ssb_key(batching) else {}
    return {"batching": batching, "dbs": str(dbs).lower(), "br": str(br).lower(), **_TABLE1, **key}


#: Experiment name -> batching hparams, in the order of the paper's Table 2.
EXPERIMENTS: dict[str, dict[str, str]] = {
    "RAND": _exp("rand"),
    "SB-BR": _exp("sb", br=True),
    "SSB-BR": _exp("ssb", br=True),
    "BKT-BR": _exp("bkt", br=True),
    "ATS-BR": _exp("ats", br=True),
    "SB": _exp("sb"),
    "SSB": _exp("ssb"),
    "SB-DBS": _exp("sb", dbs=True),
    "SSB-DBS": _exp("ssb", dbs=True),
    "SSB-DBS-BR": _exp("ssb", dbs=True, br=True),
}

#: What a sweep's extra hparams may change in an SSB experiment: its key and a calibration target,
#: which takes the place of the paper's lrf (a variant such as the ssb_key quality study's arm).
SSB_VARIANT_KEYS = ("ssb_key", "target_zpr", "target_pair_repeat")


def experiment_hparams(name: str, extra: dict[str, str]) -> dict[str, str]:
    """The experiment's batching hparams with the SSB variant `extra` asks for; the variant keys do
    not apply to the other strategies' experiments and are left out of them."""
    hparams = dict(EXPERIMENTS[name])
    variant = {k: v for k, v in extra.items() if k in SSB_VARIANT_KEYS}
    if _has_ssb_key(hparams["batching"]) and variant:
        if any(k.startswith("target_") and str(v).strip().lower() not in NONE_WORDS for k, v in variant.items()):
            hparams.pop("lrf")
        hparams |= variant
    return hparams


#: The epochs (1-based) at which Table 2 reports the smoothed validation loss, and the run length.
PAPER_EPOCHS = (100, 160, 220)
PAPER_TOTAL_EPOCHS = 220

#: Table 2: ZPR %, ABL, VL1, VL2, VL3, VLavg as printed.
PAPER_TABLE2: dict[str, dict[str, float]] = {
    name: dict(zip(("zpr", "abl", "vl1", "vl2", "vl3", "vl_avg"), row))
    for name, row in {
        "RAND": (32.02, 773.82, 0.340, 0.323, 0.312, 0.325),
        "SB-BR": (0.16, 526.43, 0.342, 0.327, 0.325, 0.329),
        "SSB-BR": (6.22, 556.22, 0.356, 0.329, 0.318, 0.332),
        "BKT-BR": (6.10, 553.40, 0.348, 0.327, 0.322, 0.331),
        "ATS-BR": (6.08, 552.48, 0.355, 0.328, 0.316, 0.331),
        "SB": (0.16, 526.43, 0.401, 0.391, 0.385, 0.388),
        "SSB": (6.22, 556.22, 0.394, 0.373, 0.359, 0.378),
        "SB-DBS": (0.47, 527.15, 0.367, 0.341, 0.330, 0.347),
        "SSB-DBS": (6.62, 557.68, 0.346, 0.329, 0.326, 0.330),
        "SSB-DBS-BR": (6.62, 557.68, 0.339, 0.320, 0.309, 0.322),
    }.items()
}

#: RAND's minutes per epoch on a GTX 1080 (Table 2), and Table 3: minutes saved and rate in %.
PAPER_RAND_MIN_PER_EPOCH = 32.82
PAPER_TABLE3: dict[str, tuple[float, float]] = {
    "SSB-BR": (9.84, 29.98),
    "SB-BR": (12.00, 36.57),
    "SSB-DBS-BR": (13.54, 41.25),
}

#: Table 4: (part title, [(from, to, paper's VL3 reduction %)]).
PAPER_TABLE4: list[tuple[str, list[tuple[str, str, float]]]] = [
    ("Part 1: SB vs. SSB", [("SB", "SSB", 6.75), ("SB-BR", "SSB-BR", 2.15), ("SB-DBS", "SSB-DBS", 1.21)]),
    ("Part 2: with or without BR", [("SB", "SB-BR", 15.58), ("SSB", "SSB-BR", 11.42), ("SSB-DBS", "SSB-DBS-BR", 5.21)]),
    (
        "Part 3: with or without DBS",
        [("SB", "SB-DBS", 14.29), ("SSB", "SSB-DBS", 9.19), ("SSB-BR", "SSB-DBS-BR", 2.83)],
    ),
]
