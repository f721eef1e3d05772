"""The run's typed configuration: the flat hparams (training/hparams.py) -> frozen, validated
configs for the training loop, the data, the batching, the model and the mel features.

Each value is checked once, here or in the config class that owns it (DataConfig in data/corpora,
BatchingConfig, Tacotron2Config, MelConfig), and every error names the hparam and what is allowed.
The parts of training/ take the configs they read (TrainConfig, BatchingConfig, ...); only the
composition root (training/run.py's build_run) and train.py hold the whole RunConfig.
Choice lists come from the modules that own them; the training settings' own vocabulary (amp,
cuda_graphs, lr_batch_scaling, matmul_precision) is defined here, so resolving hparams loads
neither the training step nor the decoder's graph code. A checkpoint stores the flat hparams, from
which a resume resolves the same RunConfig.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from batching import STRATEGIES, BatchingConfig
from batching.errors import UserError
from data.audio import MelConfig
from data.corpora import DataConfig
from data.text import N_SYMBOLS
from model import Tacotron2Config
from model.config import ModelConfigError
from model.loss import LOSS_NORMS
from training.batch_probe import PAPER_B0
from training.hparams import HParamsError

#: `amp` hparam: off (fp32, the paper's setting), bf16, fp16 (training/step.py maps them to autocast dtypes).
AMP_MODES = ("off", "bf16", "fp16")
#: `lr_batch_scaling` hparam: the exponent of B / B0 that scales a batch's learning rate.
LR_BATCH_SCALINGS = {"none": 0.0, "sqrt": 0.5, "linear": 1.0}
#: `matmul_precision` hparam: torch.set_float32_matmul_precision's levels (high: TF32 on CUDA).
MATMUL_PRECISIONS = ("highest", "high", "medium")
#: `cuda_graphs` hparam: auto (CUDA runs with graph_bucket > 0), true, false.
CUDA_GRAPHS = ("auto", "true", "false")

_MEL_KEYS = ("sample_rate", "win_ms", "hop_ms", "n_fft", "n_mels", "fmin", "fmax")


@dataclass(frozen=True)
class TrainConfig:
    """The training loop: optimisation, loss, precision, validation, checkpoints, where it runs."""

    epochs: int
    learning_rate: float
    warmup_steps: int
    lr_batch_scaling: str
    weight_decay: float
    grad_clip: float
    loss_norm: str
    guided_attention: float
    guided_attention_sigma: float
    gate_pos_weight: float
    amp: str
    matmul_precision: str
    max_bad_steps: int
    graph_bucket: int
    cuda_graphs: str
    seed: int
    validate_every: int
    val_batch_size: int
    output_dir: str
    overwrite: bool
    checkpoint_every_steps: int
    checkpoint_every_minutes: float
    collective_timeout_s: int
    force_ddp: bool
    dist_backend: str
    stop_after_steps: int
    log_every: int
    device: str
    num_workers: int
    threads: int
    progress: bool

    def __post_init__(self) -> None:
        _choose("loss_norm", self.loss_norm, LOSS_NORMS)
        _choose("amp", self.amp, AMP_MODES)
        _choose("matmul_precision", self.matmul_precision, MATMUL_PRECISIONS)
        _choose("lr_batch_scaling", self.lr_batch_scaling, tuple(LR_BATCH_SCALINGS))
        _choose("cuda_graphs", self.cuda_graphs, CUDA_GRAPHS)
        _choose("dist_backend", self.dist_backend, ("auto", "nccl", "gloo"))
        _bounds(
            self,
            positive=(
                "epochs",
                "learning_rate",
                "grad_clip",
                "guided_attention_sigma",
                "gate_pos_weight",
                "max_bad_steps",
                "validate_every",
                "val_batch_size",
                "collective_timeout_s",
                "log_every",
            ),
            non_negative=(
                "weight_decay",
                "warmup_steps",
                "guided_attention",
                "seed",
                "checkpoint_every_steps",
                "checkpoint_every_minutes",
                "stop_after_steps",
                "num_workers",
                "threads",
            ),
        )
        if not self.output_dir.strip():
            raise HParamsError("hparam 'output_dir' is empty: name the run's folder, e.g. output_dir=runs/my_voice")
        device = self.device
        if device not in ("auto", "cpu", "cuda") and not (device.startswith("cuda:") and device[5:].isdigit()):
            raise HParamsError(f"hparam 'device': '{device}' is not one of auto, cpu, cuda, cuda:N")


@dataclass(frozen=True)
class RunConfig:
    """Everything a run is, typed: built once from the hparams by resolve_config(). The decoder's
    frames per step lives in `model` (Tacotron2Config.n_frames_per_step): the loss, the collates,
    the loop and the data check take it from there; `batching` holds a copy for block plans."""

    train: TrainConfig
    data: DataConfig
    batching: BatchingConfig
    model: Tacotron2Config
    mel: MelConfig
    auto_batch_size: bool = False  # batch_size=auto: batching.batch_size is PAPER_B0 until build_run resolves it


def resolve_config(hp: dict[str, Any]) -> RunConfig:
    """The typed configs of a flat hparams dict; any bad value is an HParamsError naming it.
    batch_size=auto needs the device and the training lengths: it stands at the paper's B0 here,
    and the run (training/auto_batch.py) resolves it with with_batch_size()."""
    r = frames_per_step(hp)
    auto = _auto_batch_size(hp["batch_size"])
    try:
        data = DataConfig(**_fields_of(DataConfig, hp))
        mel = mel_config(hp)
        batching = batching_config(hp | {"batch_size": PAPER_B0} if auto else hp, r)
        model = model_config(hp, mel, r)
    except (
        UserError,
        ModelConfigError,
    ) as err:  # DataConfig, BatchingConfig, Tacotron2Config, MelConfig name the field
        raise HParamsError(as_hparam(str(err))) from None
    if auto and batching.plans_blocks:
        raise HParamsError(
            f"hparam 'batch_size': auto is not available for batching={batching.batching} (its batches "
            f"are packed blocks, which the probe does not build); give a number of blocks, e.g. "
            f"batch_size={PAPER_B0}"
        )
    bucket = _graph_bucket(hp["graph_bucket"], model.fast_decoder, r, batching)
    train = TrainConfig(**(_fields_of(TrainConfig, hp) | {"graph_bucket": bucket}))
    if train.cuda_graphs == "true" and not bucket:
        raise HParamsError(
            "hparam 'cuda_graphs': true needs graph_bucket > 0 (e.g. 64), which gives the decoder "
            "loop the few fixed shapes a graph replays"
        )
    return RunConfig(train, data, batching, model, mel, auto)


def mel_config(hp: dict[str, Any]) -> MelConfig:
    """The mel features a flat hparams dict sets (window and hop in ms, as the hparams give them): a
    run's, or the run a checkpoint's stored hparams describe."""
    return MelConfig.from_ms(**{k: hp[k] for k in _MEL_KEYS})


#: A config class's field as its messages name it, and the hparam a user typed for it (model.* for the model's).
_CONFIG_FIELD = re.compile(r"^(BatchingConfig|DataConfig|MelConfig|Tacotron2Config)\.(\w+)(=?)")


def as_hparam(message: str) -> str:
    """A config's error as the hparam the user typed: `BatchingConfig.batch_size=0 is invalid` ->
    `hparam 'batch_size': 0 is invalid`, `Tacotron2Config.attention_dim must be` -> `hparam
    'model.attention_dim' must be`."""
    match = _CONFIG_FIELD.match(message)
    if not match:
        return message
    name = f"model.{match[2]}" if match[1] == "Tacotron2Config" else match[2]
    return f"hparam '{name}'{': ' if match[3] else ''}{message[match.end() :]}"


def _auto_batch_size(value: Any) -> bool:
    """Whether hparam batch_size is `auto` (else a whole number, which BatchingConfig checks)."""
    if value != "auto" and (isinstance(value, bool) or not isinstance(value, int)):
        raise HParamsError(f"hparam 'batch_size': '{value}' is invalid: expected auto or a whole number >= 1")
    return value == "auto"


def with_batch_size(
    train: TrainConfig, batching: BatchingConfig, hp: dict[str, Any], b0: int
) -> tuple[TrainConfig, BatchingConfig, dict[str, Any]]:
    """The configs and flat hparams of a batch_size=auto run once its B0 is known: batch_size is
    `b0` and learning_rate, given for the paper's B0, is scaled by (b0 / PAPER_B0) ** k, k from
    lr_batch_scaling (the rule each batch's rate follows). The hparams a checkpoint stores hold
    both numbers, so a resume plans the same batches at the same rate and never resolves again."""
    lr = train.learning_rate * (b0 / PAPER_B0) ** LR_BATCH_SCALINGS[train.lr_batch_scaling]
    return (
        dataclasses.replace(train, learning_rate=lr),
        dataclasses.replace(batching, batch_size=b0),
        hp | {"batch_size": b0, "learning_rate": lr},
    )


def frames_per_step(hp: dict[str, Any]) -> int:
    """The decoder's frames per step r (hparam n_frames_per_step): the one reader of the hparam,
    which hands r to the model config (its home) and to the batching config."""
    r = hp["n_frames_per_step"]
    _positive("n_frames_per_step", r)
    return r


#: graph_bucket=auto (the ljspeech and filelist presets): this bucket where the run can pad its loop.
GRAPH_BUCKET_AUTO = 64


def _graph_bucket(value: Any, fast_decoder: bool, r: int, batching: BatchingConfig) -> int:
    """graph_bucket pads the fast decoder loop of padded batches (model/shapes.py) so that CUDA graphs
    can replay a few shapes. `auto`: GRAPH_BUCKET_AUTO where the run can pad (the fast decoder, a
    multiple of r, a plan that is not a block plan: blocks have one shape already), else 0. A number
    given where the run cannot pad is an error."""
    if value == "auto":
        return GRAPH_BUCKET_AUTO if fast_decoder and not GRAPH_BUCKET_AUTO % r and not batching.plans_blocks else 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise HParamsError(
            f"hparam 'graph_bucket': '{value}' is invalid: expected auto or a whole number >= 0 (0: off)"
        )
    if value and (value % r or not fast_decoder or batching.plans_blocks):
        raise HParamsError(
            f"hparam 'graph_bucket': {value} must be a multiple of n_frames_per_step={r} and needs "
            f"fast_decoder=true and a strategy whose plan is not a block plan (blocks, e.g. "
            f"BLoad's, have one shape already); here fast_decoder={fast_decoder}, "
            f"batching={batching.batching}"
        )
    return value


def batching_config(hp: dict[str, Any], n_frames_per_step: int) -> BatchingConfig:
    """The batching options of the hparams, as they are (null: unset; BatchingConfig checks them).
    n_frames_per_step (frames_per_step's r) matters to block plans only (blocks hold whole decoder
    steps) and is recorded for them alone, so other strategies' checkpoints resume whatever the
    reduction factor's bookkeeping."""
    _choose("batching", hp["batching"], STRATEGIES)
    names = {f.name for f in dataclasses.fields(BatchingConfig)} - {"n_frames_per_step"}
    config = BatchingConfig(**{k: hp[k] for k in names})
    if config.plans_blocks:
        config = dataclasses.replace(config, n_frames_per_step=n_frames_per_step)
    return config


def model_config(hp: dict[str, Any], mel: MelConfig, n_frames_per_step: int) -> Tacotron2Config:
    """The model preset with its `model.*` overrides, sized to the symbol table and the mel bands,
    with the decoder's frames per step (frames_per_step's r)."""
    fields = {
        **hp["model"],
        "n_symbols": N_SYMBOLS,
        "n_frames_per_step": n_frames_per_step,
        "fast_decoder": hp["fast_decoder"],
    }
    if fields.setdefault("n_mel_channels", mel.n_mels) != mel.n_mels:
        raise HParamsError(
            f"hparam 'model.n_mel_channels': {fields['n_mel_channels']} differs from "
            f"n_mels={mel.n_mels}; set n_mels instead"
        )
    return Tacotron2Config.from_dict(fields)


def _fields_of(cls, hp: dict[str, Any]) -> dict[str, Any]:
    return {f.name: hp[f.name] for f in dataclasses.fields(cls)}


def _choose(key: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        raise HParamsError(f"hparam '{key}': '{value}' is not one of {', '.join(allowed)}")


def _bounds(config: Any, positive: tuple[str, ...], non_negative: tuple[str, ...]) -> None:
    for key in positive:
        _positive(key, getattr(config, key))
    for key in non_negative:
        if getattr(config, key) < 0:
            raise HParamsError(f"hparam '{key}': {getattr(config, key)} must be >= 0")


def _positive(key: str, value: Any) -> None:
    if value <= 0:
        raise HParamsError(f"hparam '{key}': {value} must be > 0")
