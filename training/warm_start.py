"""Fine-tuning: a new run that starts from another checkpoint's weights only (hparam
init_checkpoint), as NVIDIA's `--warm_start` and Coqui's `--restore_path` do. The dataset,
learning rate, epochs and batching are the new run's; the optimiser starts fresh.

Two layouts are read: this recipe's checkpoints (a file, or a run folder: its checkpoint_best.pt,
else checkpoint_last.pt), which carry their hparams and so their mel settings; and NVIDIA's
Tacotron2 (`tacotron2_statedict.pt`: a dict whose 'state_dict' is keyed as NVIDIA's model.py names
its modules), whose mel settings are NVIDIA's hparams.py defaults (NVIDIA_MEL). A checkpoint
trained on other mel features is refused unless the run's mel settings match it (or
init_mel_check=false). A tensor whose shape differs from the model's (the symbol embedding of
another symbol table, the projection of another reduction factor), or that init_ignore names,
keeps its fresh initialisation; one line names each.

The plan is made at start-up against the model's shapes, so `train.py --check` reports it
before any training.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from batching.errors import UserError
from data.audio import MelConfig
from model import Tacotron2, Tacotron2Config
from training.checkpoint import is_recipe_checkpoint, read_torch_file
from training.config import mel_config
from training.hparams import resume_hparams
from training.rundir import BEST, LAST

#: NVIDIA Tacotron2's mel features (its hparams.py: sampling_rate 22050, filter_length 1024,
#: hop_length 256, win_length 1024, n_mel_channels 80, mel_fmin 0, mel_fmax 8000).
NVIDIA_MEL = MelConfig(sample_rate=22050, win_length=1024, hop_length=256, n_fft=1024, n_mels=80, fmin=0.0, fmax=8000.0)

#: This recipe's state-dict names -> NVIDIA/tacotron2's (model.py, layers.py): NVIDIA wraps each
#: Linear in LinearNorm (`.linear_layer`) and each Conv1d in ConvNorm (`.conv`), keeps each
#: convolution and its BatchNorm in an nn.Sequential (indices 0 and 1), names the attention
#: `attention_layer` with its location convolution and dense layer in a `location_layer`, and the
#: mel projection `linear_projection`. Names not matched here (embedding, encoder.lstm.*,
#: decoder.attention_rnn.*, decoder.decoder_rnn.*) are the same in both.
NVIDIA_KEY_MAP: tuple[tuple[str, str], ...] = (
    (r"^(encoder|postnet)\.convolutions\.(\d+)\.conv\.", r"\1.convolutions.\2.0.conv."),
    (r"^(encoder|postnet)\.convolutions\.(\d+)\.norm\.", r"\1.convolutions.\2.1."),
    (r"^decoder\.prenet\.layers\.(\d+)\.", r"decoder.prenet.layers.\1.linear_layer."),
    (r"^decoder\.attention\.(query_layer|memory_layer|v)\.", r"decoder.attention_layer.\1.linear_layer."),
    (r"^decoder\.attention\.location_conv\.", r"decoder.attention_layer.location_layer.location_conv.conv."),
    (r"^decoder\.attention\.location_dense\.", r"decoder.attention_layer.location_layer.location_dense.linear_layer."),
    (r"^decoder\.projection\.", r"decoder.linear_projection.linear_layer."),
    (r"^decoder\.gate_layer\.", r"decoder.gate_layer.linear_layer."),
)
#: A key only NVIDIA's layout has (this recipe's first encoder convolution is `...0.conv.weight`).
NVIDIA_MARKER = "encoder.convolutions.0.0.conv.weight"
#: BatchNorm's step counter: not a weight, and absent from checkpoints older than PyTorch 0.4.1.
_COUNTER = "num_batches_tracked"
_MEL_FIELDS = ("sample_rate", "win_length", "hop_length", "n_fft", "n_mels", "fmin", "fmax")


class WarmStartError(UserError):
    """An init_checkpoint that cannot start this run; the message names it and what to do."""


def to_nvidia_key(key: str) -> str:
    """This recipe's state-dict name of a tensor as NVIDIA's Tacotron2 names it (NVIDIA_KEY_MAP)."""
    for pattern, replacement in NVIDIA_KEY_MAP:
        if re.match(pattern, key):
            return re.sub(pattern, replacement, key)
    return key


@dataclass(frozen=True)
class InitSource:
    """A checkpoint read for its weights: the file, its layout, its tensors under its own names and
    the mel features it was trained on."""

    path: Path
    layout: str  # "recipe" | "nvidia"
    tensors: dict[str, torch.Tensor]
    mel: MelConfig

    def name_of(self, key: str) -> str:
        """This source's name for the model's tensor `key`."""
        return to_nvidia_key(key) if self.layout == "nvidia" else key


def checkpoint_file(path: Path) -> Path:
    """The file init_checkpoint names: itself, or a run folder's checkpoint_best.pt (else checkpoint_last.pt)."""
    if path.is_dir():
        found = [path / name for name in (BEST, LAST) if (path / name).is_file()]
        if not found:
            raise WarmStartError(f"init_checkpoint {path}: the folder holds no {BEST} or {LAST}")
        return found[0]
    if not path.is_file():
        raise WarmStartError(f"init_checkpoint {path}: no such file or folder")
    return path


def read_init_source(path: Path) -> InitSource:
    """The weights and mel features of a recipe checkpoint or an NVIDIA Tacotron2 state dict."""
    path = checkpoint_file(Path(path))
    loaded = read_torch_file(path)
    if is_recipe_checkpoint(loaded):
        stored = resume_hparams(loaded["hparams"], "")  # settings it predates take their defaults
        return InitSource(path, "recipe", loaded["model"], mel_config(stored))
    state = loaded.get("state_dict", loaded) if isinstance(loaded, dict) else None
    if isinstance(state, dict):
        state = {k.removeprefix("module."): v for k, v in state.items()}  # saved from a DDP-wrapped model
    if not isinstance(state, dict) or NVIDIA_MARKER not in state:
        raise WarmStartError(
            f"init_checkpoint {path} is neither a checkpoint of this recipe (model, hparams, progress) nor an "
            f"NVIDIA Tacotron2 state dict (a 'state_dict' with {NVIDIA_MARKER})"
        )
    return InitSource(path, "nvidia", state, NVIDIA_MEL)


def mel_differences(source: MelConfig, run: MelConfig) -> list[str]:
    """Each mel setting where the checkpoint and the run differ, as 'name: theirs (this run: ours)'."""
    return [
        f"{name} {getattr(source, name):g} (this run: {getattr(run, name):g})"
        for name in _MEL_FIELDS
        if getattr(source, name) != getattr(run, name)
    ]


def ms_hparam(samples: int, sample_rate: int) -> str:
    """The shortest milliseconds value that MelConfig.from_ms rounds back to `samples`."""
    exact = samples * 1000 / sample_rate
    for digits in range(1, 9):
        text = f"{round(exact, digits):g}"
        if int(sample_rate * float(text) / 1000 + 0.5) == samples:
            return text
    return repr(exact)


def matching_mel_hparams(mel: MelConfig) -> str:
    """The --hparams that give a run the mel features `mel`."""
    return (
        f"sample_rate={mel.sample_rate},win_ms={ms_hparam(mel.win_length, mel.sample_rate)},"
        f"hop_ms={ms_hparam(mel.hop_length, mel.sample_rate)},n_fft={mel.n_fft},n_mels={mel.n_mels},"
        f"fmin={mel.fmin:g},fmax={mel.fmax:g}"
    )


def check_mel(source: InitSource, run: MelConfig, enforce: bool) -> None:
    """A checkpoint trained on other mel features predicts frames this run's data does not hold:
    an error that names each difference and the hparams that match (init_mel_check=false: allowed)."""
    differences = mel_differences(source.mel, run)
    if differences and enforce:
        raise WarmStartError(
            f"init_checkpoint {source.path} was trained on other mel features: {'; '.join(differences)}. "
            f"Fine-tune on its features with --hparams {matching_mel_hparams(source.mel)} (the mels are "
            f"computed again; every clip must be at {source.mel.sample_rate} Hz), or set init_mel_check=false "
            f"to load its weights anyway"
        )


@dataclass(frozen=True)
class WarmStart:
    """What a new run loads from init_checkpoint (tensors under the model's names) and the one line
    that says what it loaded and which tensors keep their fresh initialisation."""

    tensors: dict[str, torch.Tensor]
    line: str

    def load_into(self, model: torch.nn.Module) -> None:
        _, unexpected = model.load_state_dict(self.tensors, strict=False)  # the missing ones stay fresh, by plan
        if unexpected:  # the plan is made against this model's own names
            raise RuntimeError(f"warm start: tensors the model does not have: {unexpected}")


def split_prefixes(text: str) -> tuple[str, ...]:
    """init_ignore: layer-name prefixes separated by `+` or spaces (a comma ends an --hparams item)."""
    return tuple(part for part in re.split(r"[+\s]+", text) if part)


def plan_warm_start(source: InitSource, model_cfg: Tacotron2Config, ignore: tuple[str, ...]) -> WarmStart:
    """Match the source's tensors to the model's (a throwaway copy, built without touching the
    run's random state: the meta device would be free, but its first use costs seconds of imports)."""
    with torch.random.fork_rng(devices=[]):
        shapes = {k: v.shape for k, v in Tacotron2(model_cfg).state_dict().items()}
    for prefix in ignore:
        if not any(key.startswith(prefix) for key in shapes):
            raise WarmStartError(
                f"hparam 'init_ignore': no layer of the model starts with '{prefix}' (its layers: "
                f"{', '.join(sorted({key.split('.')[0] for key in shapes}))}, e.g. embedding, decoder.gate_layer)"
            )
    tensors: dict[str, torch.Tensor] = {}
    ignored, reshaped, absent = [], [], []
    for key, shape in shapes.items():
        theirs = source.tensors.get(source.name_of(key))
        if key.startswith(ignore):
            ignored.append(key)
        elif theirs is None:
            absent += [] if key.endswith(_COUNTER) else [key]
        elif theirs.shape != shape:
            reshaped.append(_reshaped(key, theirs.shape, shape))
        else:
            tensors[key] = theirs
    weights = [k for k in tensors if not k.endswith(_COUNTER)]
    if not weights:
        raise WarmStartError(
            f"init_checkpoint {source.path}: no tensor fits this model ({len(reshaped)} of other shapes, "
            f"e.g. {reshaped[0] if reshaped else 'none'}): choose the model_preset (and model.* settings) it was "
            f"trained with ({'model_preset=full' if source.layout == 'nvidia' else 'see its hparams.json'})"
        )
    used = {source.name_of(k) for k in shapes}
    unused = sorted(k for k in source.tensors if k not in used)
    parts = [f"{len(weights)} of {sum(not k.endswith(_COUNTER) for k in shapes)} weight tensors loaded"]
    parts += [f"re-initialised (shape differs): {', '.join(reshaped)}"] if reshaped else []
    parts += [f"re-initialised (init_ignore): {', '.join(ignored)}"] if ignored else []
    parts += [f"not in the checkpoint, re-initialised: {', '.join(absent)}"] if absent else []
    parts += [f"unused from the checkpoint: {', '.join(unused)}"] if unused else []
    layout = "NVIDIA Tacotron2 layout" if source.layout == "nvidia" else "this recipe's checkpoint"
    return WarmStart(tensors, f"init_checkpoint {source.path} ({layout}): {'; '.join(parts)}")


def _reshaped(key: str, theirs: torch.Size, ours: torch.Size) -> str:
    what = f"{key} {list(theirs)} -> {list(ours)}"
    if key == "embedding.weight":
        return f"{what} (its symbol table has {theirs[0]} symbols, this recipe's {ours[0]})"
    return what


def warm_start(hp: dict[str, Any], model_cfg: Tacotron2Config, mel: MelConfig) -> WarmStart | None:
    """The warm start the hparams ask for (init_checkpoint, init_ignore, init_mel_check); None without one."""
    if not hp["init_checkpoint"]:
        return None
    source = read_init_source(Path(hp["init_checkpoint"]))
    check_mel(source, mel, hp["init_mel_check"])
    return plan_warm_start(source, model_cfg, split_prefixes(hp["init_ignore"]))
