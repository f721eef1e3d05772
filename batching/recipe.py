"""The recipe's hparams.yaml as `python -m batching`'s defaults, so that one `--hparams` string plans
the same epoch there as in `train.py --check`.

The batching reads the file's batching keys itself (it ships alone and imports nothing of the
recipe): hparams.yaml, then the chosen dataset's preset (`dataset_presets`), then the string's
values, as training/hparams.py resolves them; the recipe's other keys are accepted and left alone
(an unknown one is an error). The rule between SSB's width settings is ssb_width_rule, here. Without
an hparams.yaml (the wheel alone), BatchingConfig's own defaults (the paper's) apply.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .config import OWNED_OPTIONS, BatchingConfig
from .errors import UserError
from .options import NONE_WORDS, OptionError, coerce, parse_overrides
from .strategies import STRATEGY_TABLE

#: The recipe's defaults, beside the package in a checkout (absent where the wheel is installed alone).
RECIPE_HPARAMS = Path(__file__).resolve().parents[1] / "hparams.yaml"
#: The hparams that are BatchingConfig's fields (its n_frames_per_step is the recipe's frames per decoder step).
BATCHING_KEYS = tuple(f.name for f in dataclasses.fields(BatchingConfig) if f.name != "n_frames_per_step")
TARGETS = ("target_zpr", "target_pair_repeat")


def recipe_batching(overrides: str, defaults_file: Path | None = RECIPE_HPARAMS) -> tuple[BatchingConfig, str]:
    """The batching of `overrides` on top of defaults_file (None or absent: BatchingConfig's own), and
    where the defaults came from (printed by the CLI). The config holds the recipe's frames per decoder
    step whatever the strategy, so that its stats count the decoder steps `train.py --check` counts
    (the planner reads it for block plans only, so no plan changes)."""
    try:
        given = parse_overrides(overrides)
    except OptionError as error:
        raise OptionError(f"hparam {error}") from None
    if defaults_file is None or not Path(defaults_file).is_file():
        r = coerce("n_frames_per_step", given.pop("n_frames_per_step", 1), int)
        return BatchingConfig.from_dict(given | {"n_frames_per_step": r}), "BatchingConfig's (the paper's)"
    base, presets = _read_yaml(Path(defaults_file))
    unknown = sorted(k for k in given if k not in base and not k.startswith("model."))
    if unknown:
        raise OptionError(f"unknown hparam(s) {', '.join(unknown)} (not in {defaults_file})")
    dataset = given.get("dataset", base["dataset"])
    if dataset not in presets:
        raise OptionError(f"hparam 'dataset': '{dataset}' is not one of {', '.join(presets)}")
    chosen = {**presets[dataset], **given}
    values = {k: chosen[k] if k in chosen else base[k] for k in BATCHING_KEYS if k in chosen or k in base}
    if values["batch_size"] == "auto":
        raise OptionError("hparam 'batch_size': auto is probed on the GPU by train.py; give a number here")
    ssb_width_rule(values, set(chosen))
    r = coerce("n_frames_per_step", chosen.get("n_frames_per_step", base["n_frames_per_step"]), int)
    return BatchingConfig.from_dict(values | {"n_frames_per_step": r}), f"{defaults_file}, dataset={dataset}'s preset"


def ssb_width_rule(hp: dict[str, Any], given: set[str]) -> None:
    """The one rule between SSB's width settings, in place. The default target calibrates the
    default key; a setting given (by the dataset's preset or --hparams) takes its place:
    - another strategy than ssb: the settings other strategies own (SSB's key and target among
      them) that were not given are unset (the chosen strategy would refuse them);
    - a target given: the other target's default is unset; lrf given as well is an error (both
      set the width);
    - lrf given, or ssb_key=length (the paper's key), without a target: the width is lrf (0.1 by
      default), the default target unset: `ssb_key=length` alone is the paper's SSB."""
    owned = STRATEGY_TABLE[hp["batching"]].options if hp["batching"] in STRATEGY_TABLE else ()
    hp.update({key: None for key in OWNED_OPTIONS if key not in owned and key not in given})
    if "ssb_key" not in owned:
        return
    targets = [key for key in TARGETS if key in given and not _unset(hp[key])]
    if targets and "lrf" in given:
        raise OptionError(
            f"hparams 'lrf' and '{targets[0]}' both set SSB's noise width: keep lrf (a fixed width) "
            f"or {targets[0]} (calibrated on the training lengths at start-up)"
        )
    if targets or "lrf" in given or ("ssb_key" in given and (_unset(hp["ssb_key"]) or hp["ssb_key"] == "length")):
        hp.update({key: None for key in TARGETS if key not in given})


def _unset(value: Any) -> bool:
    """None, or a command-line word for it (null, none, nothing)."""
    return value is None or (isinstance(value, str) and value.strip().lower() in NONE_WORDS)


def _read_yaml(path: Path) -> tuple[dict[str, Any], dict[str, dict]]:
    """(defaults, dataset presets) of an hparams.yaml; PyYAML is imported here only (the CLI's one use)."""
    try:
        import yaml
    except ImportError:
        raise UserError(f"reading {path} needs PyYAML (pip install pyyaml), or pass --defaults none") from None
    try:
        base = yaml.safe_load(path.read_text(encoding="utf-8"))
        return base, base.pop("dataset_presets")
    except (yaml.YAMLError, AttributeError, KeyError) as err:
        raise UserError(f"{path} is not the recipe's hparams.yaml ({err}); pass --defaults none") from None
