"""Hyper-parameters: hparams.yaml, then the dataset's preset, then `--hparams k=v,k=v`.

Every value is checked against the type of its default in hparams.yaml, and keys with a fixed
set of values against that set, so a typo fails at start-up instead of hours into a run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from batching import STRATEGIES

DEFAULTS_FILE = Path(__file__).resolve().parents[1] / "hparams.yaml"

CHOICES = {
    "dataset": ("demo", "ljspeech", "filelist"),
    "batching": STRATEGIES,
    "model_preset": ("full", "small"),
    "loss_norm": ("valid", "padded"),
    "amp": ("off", "bf16", "fp16"),
}
# 0 means "the default" for capacity (B0 x L_max), max_length (no limit), block_length (longest utterance)
NON_NEGATIVE = ("capacity", "checkpoint_every_steps", "stop_after_steps", "num_workers", "weight_decay",
                "demo_utterances", "guided_attention", "threads", "max_length", "block_length")
POSITIVE = ("batch_size", "epochs", "n_frames_per_step", "validate_every", "val_batch_size", "learning_rate",
            "grad_clip", "max_bad_steps", "bucket_size", "n_bins", "guided_attention_sigma", "gate_pos_weight",
            "bucket_interval")

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


class HParamsError(ValueError):
    """A bad key or value; the message names it and what is allowed."""


def parse_overrides(text: str) -> dict[str, str]:
    """`a=1,b=x,model.attention_dim=64` -> {'a': '1', ...} (values still strings)."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise HParamsError(f"--hparams: '{item}' is not of the form key=value")
        out[key.strip()] = value.strip()
    return out


def _coerce(key: str, raw: Any, default: Any) -> Any:
    """Convert `raw` (a string from the command line or a YAML value) to the type of `default`."""
    text = str(raw).strip()
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise HParamsError(f"hparam '{key}': '{raw}' is not a boolean (use true or false)")
    if isinstance(default, int):
        try:
            if isinstance(raw, float) and not raw.is_integer():
                raise ValueError
            return int(float(text)) if isinstance(raw, float) else int(text)
        except ValueError:
            raise HParamsError(f"hparam '{key}': '{raw}' is not an integer") from None
    if isinstance(default, float):
        try:
            return float(text)
        except ValueError:
            raise HParamsError(f"hparam '{key}': '{raw}' is not a number") from None
    return text if isinstance(default, str) else raw


def _validate(hp: dict[str, Any]) -> None:
    for key, allowed in CHOICES.items():
        if hp[key] not in allowed:
            raise HParamsError(f"hparam '{key}': '{hp[key]}' is not one of {', '.join(allowed)}")
    for key in NON_NEGATIVE:
        if hp[key] < 0:
            raise HParamsError(f"hparam '{key}': {hp[key]} must be >= 0")
    for key in POSITIVE:
        if hp[key] <= 0:
            raise HParamsError(f"hparam '{key}': {hp[key]} must be > 0")
    if not 0 <= hp["lrf"]:
        raise HParamsError(f"hparam 'lrf': {hp['lrf']} must be >= 0")
    if hp["dataset"] == "filelist" and not (hp["train_filelist"] and hp["val_filelist"]):
        raise HParamsError("dataset=filelist needs train_filelist=PATH and val_filelist=PATH")
    device = hp["device"]
    if device not in ("auto", "cpu", "cuda") and not (device.startswith("cuda:") and device[5:].isdigit()):
        raise HParamsError(f"hparam 'device': '{device}' is not one of auto, cpu, cuda, cuda:N")


def load_hparams(overrides: str | dict[str, Any] = "", defaults_file: Path = DEFAULTS_FILE) -> dict[str, Any]:
    """The resolved hyper-parameters as a plain dict (what a run directory records)."""
    base = yaml.safe_load(Path(defaults_file).read_text())
    presets = base.pop("dataset_presets")
    model_presets = base.pop("model_presets")
    given = parse_overrides(overrides) if isinstance(overrides, str) else dict(overrides)

    model_overrides = {k.split(".", 1)[1]: v for k, v in given.items() if k.startswith("model.")}
    flat = {k: v for k, v in given.items() if not k.startswith("model.")}
    unknown = sorted(set(flat) - set(base) - {"model"})
    if unknown:
        raise HParamsError(f"unknown hparam(s) {', '.join(unknown)}; known: {', '.join(sorted(base))}")

    hp = dict(base)
    dataset = _coerce("dataset", flat.get("dataset", hp["dataset"]), "")
    if dataset not in presets:
        raise HParamsError(f"hparam 'dataset': '{dataset}' is not one of {', '.join(presets)}")
    for key, value in {**presets[dataset], **flat}.items():
        hp[key] = dict(value) if key == "model" else _coerce(key, value, base[key])
    hp["model"] = {**hp.get("model", {}),
                   **{k: yaml.safe_load(v) if isinstance(v, str) else v for k, v in model_overrides.items()}}
    _validate(hp)
    hp["model"] = {**model_presets[hp["model_preset"]], **hp["model"]}
    return hp


def model_fields(hp: dict[str, Any], n_symbols: int) -> dict[str, Any]:
    """Keyword arguments of `model.Tacotron2Config`: the preset, then `model.*` overrides."""
    return {**hp["model"], "n_symbols": n_symbols, "n_frames_per_step": hp["n_frames_per_step"]}


def batching_fields(hp: dict[str, Any]) -> dict[str, Any]:
    """The subset of hparams that `batching.BatchingConfig` takes (capacity 0: the paper's; max_length 0: no limit)."""
    return {
        "batching": hp["batching"], "batch_size": hp["batch_size"], "lrf": hp["lrf"],
        "bucket_size": hp["bucket_size"], "n_bins": hp["n_bins"], "dbs": hp["dbs"], "br": hp["br"],
        "capacity": hp["capacity"] or None, "drop_last": hp["drop_last"], "seed": hp["seed"],
        "bucket_interval": hp["bucket_interval"], "max_length": hp["max_length"] or None,
        # bload only (left at their defaults otherwise, so other strategies' checkpoints still resume)
        **({"block_length": hp["block_length"] or None, "n_frames_per_step": hp["n_frames_per_step"]}
           if hp["batching"] == "bload" else {}),
    }
