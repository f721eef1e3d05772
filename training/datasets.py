"""From the `dataset` hparam to the train and validation datasets (filelists -> TextMelDataset)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from data.audio import MelConfig
from data.dataset import TextMelDataset, precompute_mels
from data.demo import make_demo_corpus
from data.filelist import read_filelist

REPO = Path(__file__).resolve().parents[1]
LJSPEECH_FILELISTS = (REPO / "filelists" / "ljspeech_train.txt", REPO / "filelists" / "ljspeech_val.txt")


def resolve_filelists(hp: dict[str, Any]) -> tuple[Path, Path]:
    """The (train, validation) filelists the hparams point at; the demo corpus is generated if needed."""
    if hp["dataset"] == "demo":
        return make_demo_corpus(Path(hp["demo_dir"]), n_utterances=hp["demo_utterances"], seed=0)
    if hp["train_filelist"] or hp["val_filelist"]:
        train, val = Path(hp["train_filelist"]), Path(hp["val_filelist"])
    else:
        train, val = LJSPEECH_FILELISTS
    for path in (train, val):
        if not path.is_file():
            hint = ("run `python scripts/prepare_ljspeech.py --ljspeech /path/to/LJSpeech-1.1` first"
                    if hp["dataset"] == "ljspeech" else "check train_filelist / val_filelist")
            raise FileNotFoundError(f"filelist {path} not found: {hint}")
    return train, val


def build_datasets(hp: dict[str, Any], progress: bool = True) -> tuple[TextMelDataset, TextMelDataset]:
    """Datasets whose `.frames` (from the filelist) are the lengths the batch planner uses."""
    mel_cfg = MelConfig()
    cache = Path(hp["mel_cache_dir"]) if hp["mel_cache_dir"] else None
    sets = tuple(TextMelDataset(read_filelist(path), mel_cfg, cache_dir=cache) for path in resolve_filelists(hp))
    if cache is not None:
        for dataset in sets:
            precompute_mels(dataset, progress=progress)
    return sets
