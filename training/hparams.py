"""Hyper-parameters: hparams.yaml, then the dataset's preset, then `--hparams k=v,k=v`.

Every value is coerced to the type of its default in hparams.yaml (batching.options: the one
`key=value` parser and coercer), so a typo fails at start-up instead of hours into a run; a key
whose default is null (an optional setting) is read as YAML and checked by the config that owns
it. The result is the flat dict a run directory records; training/config.py turns it into the
typed, validated configs the recipe uses. Torch-free, so scripts can use it cheaply.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from batching.errors import UserError
from batching.options import OptionError, coerce, parse_overrides
from batching.recipe import TARGETS, ssb_width_rule

DEFAULTS_FILE = Path(__file__).resolve().parents[1] / "hparams.yaml"

#: The only settings a resumed run may change: where and how fast it runs, not what it trains.
RESUME_MAY_CHANGE = frozenset(
    {
        "epochs",
        "device",
        "num_workers",
        "threads",
        "progress",
        "checkpoint_every_steps",
        "checkpoint_every_minutes",
        "collective_timeout_s",
        "stop_after_steps",
        "validate_every",
        "max_bad_steps",
        "log_every",
        "cuda_graphs",
        "force_ddp",
        "dist_backend",
    }
)

#: Settings with a default value that null turns off (SSB's default key and calibration target): read
#: as YAML, as an optional setting is, and checked by their config (target_zpr: a number or "paper").
NULLABLE = frozenset({"ssb_key", "target_zpr"})
#: Settings read as YAML whatever their default's type: the nullable ones, and graph_bucket and
#: batch_size (a number or auto; training/config.py checks them).
_READ_AS_YAML = NULLABLE | {"graph_bucket", "batch_size"}


class HParamsError(UserError):
    """A bad key or value; the message names it and what is allowed."""


def read_defaults(defaults_file: Path = DEFAULTS_FILE) -> tuple[dict[str, Any], dict[str, dict], dict[str, dict]]:
    """(defaults, dataset presets, model presets) from hparams.yaml."""
    base = yaml.safe_load(Path(defaults_file).read_text())
    return base, base.pop("dataset_presets"), base.pop("model_presets")


def split_overrides(overrides: str | dict[str, Any]) -> dict[str, Any]:
    """`--hparams` text (or a dict) as a dict, with errors as HParamsError."""
    if not isinstance(overrides, str):
        return dict(overrides)
    try:
        return parse_overrides(overrides)
    except OptionError as err:
        raise HParamsError(f"--hparams: {err}") from None


def _typed(key: str, raw: Any, default: Any) -> Any:
    """`raw` as the type of `default` (its YAML value); for a null default (an optional setting)
    as YAML reads it, checked by the config that owns the key."""
    if default is None or key in _READ_AS_YAML:
        return _yaml_value(key, raw)
    kind = bool if isinstance(default, bool) else type(default) if isinstance(default, (int, float, str)) else object
    if kind is str and isinstance(raw, bool):  # YAML's true/false for a text setting (cuda_graphs)
        raw = str(raw).lower()
    if kind is int and isinstance(raw, float) and not raw.is_integer():
        raise HParamsError(f"hparam '{key}': '{raw}' is not an integer")
    try:
        return coerce(key, raw, kind)
    except OptionError as err:
        raise HParamsError(f"hparam {err}") from None


def _yaml_value(key: str, raw: Any) -> Any:
    """A command-line string whose type no default says (an optional setting, a model.* field) as
    YAML reads it: 3000 -> 3000, 1.5 -> 1.5, null (or nothing) -> None, abc -> 'abc'."""
    if not isinstance(raw, str):
        return raw
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        raise HParamsError(f"hparam '{key}': '{raw}' is not a value (a number, text, true/false or null)") from None


def load_hparams(overrides: str | dict[str, Any] = "", defaults_file: Path = DEFAULTS_FILE) -> dict[str, Any]:
    """The resolved hyper-parameters as a plain, typed dict (what a run directory records).

    `model.X=V` overrides one field of the model preset; `model` as a key (a whole dict, as a
    resumed run passes its stored hparams) replaces the preset's overrides.
    """
    base, presets, model_presets = read_defaults(defaults_file)
    given = split_overrides(overrides)
    model_overrides = {k.split(".", 1)[1]: v for k, v in given.items() if k.startswith("model.")}
    flat = {k: v for k, v in given.items() if not k.startswith("model.")}
    unknown = sorted(set(flat) - set(base))
    if unknown:
        raise HParamsError(unknown_message(unknown, sorted(base)))
    dataset = _typed("dataset", flat.get("dataset", base["dataset"]), "")
    if dataset not in presets:
        raise HParamsError(f"hparam 'dataset': '{dataset}' is not one of {', '.join(presets)}")
    hp = dict(base)
    given = {**presets[dataset], **flat}
    for key, value in given.items():
        hp[key] = dict(value) if key == "model" else _typed(key, value, base[key])
    try:
        ssb_width_rule(hp, set(given))
    except OptionError as err:
        raise HParamsError(str(err)) from None
    hp["model"] = {**hp.get("model", {}), **{k: _yaml_value(f"model.{k}", v) for k, v in model_overrides.items()}}
    if hp["model_preset"] not in model_presets:
        raise HParamsError(f"hparam 'model_preset': '{hp['model_preset']}' is not one of {', '.join(model_presets)}")
    hp["model"] = {**model_presets[hp["model_preset"]], **hp["model"]}
    return hp


def unknown_message(unknown: list[str], known: list[str]) -> str:
    """The error for misspelled hparams: each with its nearest known name (difflib), else every known name."""
    guesses = {key: difflib.get_close_matches(key, known, n=1) for key in unknown}
    if all(guesses.values()):
        meant = ", ".join(f"{key} (did you mean {guesses[key][0]}?)" for key in unknown)
        return f"unknown hparam(s) {meant}; every setting is in hparams.yaml"
    return f"unknown hparam(s) {', '.join(unknown)}; known: {', '.join(known)}"


def resume_hparams(stored: dict[str, Any], overrides: str) -> dict[str, Any]:
    """A resumed run's hparams: the run's own (settings added to hparams.yaml since it was written
    take their defaults) with the few changes RESUME_MAY_CHANGE allows."""
    changes = split_overrides(overrides)
    refused = sorted(set(changes) - RESUME_MAY_CHANGE)
    if refused:
        raise HParamsError(
            f"--resume: '{refused[0]}' cannot change in a resumed run (allowed: {', '.join(sorted(RESUME_MAY_CHANGE))})"
        )
    base, _, _ = read_defaults()
    # Runs written by older versions stored 0 for "unset" in the settings whose default is now null
    # (capacity, max_length, block_length, n_utterances): a resume reads that 0 as null. Only here: a new
    # run's 0 is an error.
    known = {k: None if base[k] is None and type(v) is int and v == 0 else v for k, v in stored.items() if k in base}
    # Runs written before the cost key was the default stored no SSB key and target: they planned
    # with the paper's. A stored target made the width; the lrf stored beside it is unused.
    known = {**dict.fromkeys(NULLABLE), **known}
    if any(known.get(key) is not None for key in TARGETS):
        known.pop("lrf", None)
    return load_hparams({**known, **changes})
