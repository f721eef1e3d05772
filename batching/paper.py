"""The paper's LJSpeech figures (Tables 1-2, Section 4), the reference our analysis is checked against."""

from __future__ import annotations

from .config import BatchingConfig

#: Table 1 rows (fixed B0 = 16, chosen parameters) and the DBS rows of Section 4 / Table 2.
TABLE1_CONFIGS: dict[str, BatchingConfig] = {
    "RAND": BatchingConfig("rand"),
    "SB": BatchingConfig("sb"),
    "SSB": BatchingConfig("ssb", lrf=0.1),
    "BKT": BatchingConfig("bkt", bucket_size=1024),
    "ATS": BatchingConfig("ats", n_bins=58),
    "RAND-DBS": BatchingConfig("rand", dbs=True),
    "SB-DBS": BatchingConfig("sb", dbs=True),
    "SSB-DBS": BatchingConfig("ssb", lrf=0.1, dbs=True),
}

#: (number of batches, ZPR %, ABL frames) as printed; None where the paper gives no figure.
PAPER_TABLE1: dict[str, tuple[int, float | None, float | None]] = {
    "RAND": (655, 32.02, 773.82),
    "SB": (655, 0.16, 526.43),
    "SSB": (655, 6.22, 556.22),
    "BKT": (655, 6.10, 553.40),
    "ATS": (655, 6.08, 552.48),
    "RAND-DBS": (606, None, None),
    "SB-DBS": (419, 0.47, 527.15),
    "SSB-DBS": (449, 6.62, 557.68),
}
