"""Settings that make a strategy degenerate on the corpus at hand: a plan that runs but is not what
its name promises. `python -m batching` prints them as warnings; calibrated_line (the recipe's log
and `train.py --check`) carries the one a calibration can reach, SSB at lrf=0."""

from __future__ import annotations

from .config import BatchingConfig

_CALIBRATE = "python -m batching calibrate --lengths FILE finds one that pads as SSB does"


def same_batches(lrf: float) -> str:
    """The words for SSB without noise; "" for any other width."""
    if lrf:
        return ""
    return (
        "at lrf=0 SSB is a plain sort: every epoch holds the same batches (br shuffles only their order); "
        "set lrf > 0 or target_pair_repeat for batches that change"
    )


def degenerate_settings(n_lengths: int, config: BatchingConfig, calibrated: bool = False) -> list[str]:
    """One warning per setting that makes config's strategy act as another on n_lengths lengths: a bkt
    bucket or an ats bin count at or above the corpus size (one bucket: a shuffle; bins of one: a
    shuffle), SSB at lrf=0 (a sort); `calibrated`: the calibration's line says the last already."""
    warnings = []
    if config.batching == "bkt" and config.bucket_size >= n_lengths:
        warnings.append(
            f"bucket_size={config.bucket_size} >= the {n_lengths} lengths: one bucket, shuffled whole, so bkt "
            f"plans as rand does; set bucket_size below {n_lengths} ({_CALIBRATE})"
        )
    if config.batching == "ats" and config.n_bins >= n_lengths:
        warnings.append(
            f"n_bins={config.n_bins} >= the {n_lengths} lengths: bins of at most one, nothing to sort, so ats "
            f"plans as rand does; set n_bins below {n_lengths} ({_CALIBRATE})"
        )
    if config.batching == "ssb" and config.lrf == 0 and not calibrated:
        warnings.append(same_batches(0))
    return warnings
