"""From the `dataset` hparam to the train and validation datasets (filelists -> TextMelDataset).

DATASET_FILELISTS is the one table of corpora: each entry returns the (train, validation)
filelists of a DataConfig, generating the corpus first where the project makes it itself.
Adding a corpus: a function here and its row, and a preset in hparams.yaml's dataset_presets.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from data.audio import MelConfig
from data.dataset import TextMelDataset, precompute_mels
from data.demo import make_demo_corpus
from data.espeak import make_espeak_corpus
from data.filelist import FilelistError, read_filelist
from training.hparams import HParamsError

if TYPE_CHECKING:  # annotations only: training/config.py takes DATASETS from here
    from training.config import DataConfig

REPO = Path(__file__).resolve().parents[1]
LJSPEECH_FILELISTS = (REPO / "filelists" / "ljspeech_train.txt", REPO / "filelists" / "ljspeech_val.txt")
SHARED_TRANSCRIPTS = REPO.parent / "shared" / "data" / "ljspeech" / "lengths.tsv"


def demo_filelists(data: DataConfig, mel: MelConfig) -> tuple[Path, Path]:
    """The embedded demo corpus, generated once (rendered at the paper's mel settings)."""
    if (mel.sample_rate, mel.hop_length) != (MelConfig().sample_rate, MelConfig().hop_length):
        raise HParamsError(f"dataset=demo is rendered at {MelConfig().sample_rate} Hz with a 12.5 ms hop, not "
                           f"sample_rate={mel.sample_rate} with a {mel.hop_length}-sample hop; leave sample_rate and "
                           "hop_ms at their defaults for it (or use dataset=filelist with your own clips)")
    return make_demo_corpus(Path(data.demo_dir), n_utterances=data.demo_utterances, seed=0)


def ljspeech_filelists(data: DataConfig, mel: MelConfig) -> tuple[Path, Path]:
    """filelists/ljspeech_{train,val}.txt from scripts/prepare_ljspeech.py (or the ones named)."""
    if data.train_filelist or data.val_filelist:
        return user_filelists(data, mel)
    return _existing(LJSPEECH_FILELISTS, "run `python scripts/prepare_ljspeech.py --ljspeech /path/to/LJSpeech-1.1` "
                                         "first")


def user_filelists(data: DataConfig, mel: MelConfig) -> tuple[Path, Path]:
    """The user's own `wav|text|frames` filelists."""
    return _existing((Path(data.train_filelist), Path(data.val_filelist)), "check train_filelist / val_filelist")


def _existing(paths: tuple[Path, Path], hint: str) -> tuple[Path, Path]:
    for path in paths:
        if not path.is_file():
            raise FilelistError(f"filelist {path} not found: {hint}")
    return paths


def espeak_filelists(data: DataConfig, mel: MelConfig) -> tuple[Path, Path]:
    """English speech the project generates with eSpeak NG (data/espeak.py) from `transcripts`
    (default: the 13,100 LJSpeech transcripts in ../shared beside the checkout), once."""
    if (mel.sample_rate, mel.hop_length) != (MelConfig().sample_rate, MelConfig().hop_length):
        raise HParamsError(f"dataset=espeak is synthesised at {MelConfig().sample_rate} Hz with a 12.5 ms hop, not "
                           f"sample_rate={mel.sample_rate} with a {mel.hop_length}-sample hop; leave sample_rate and "
                           "hop_ms at their defaults for it")
    transcripts = Path(data.transcripts) if data.transcripts else SHARED_TRANSCRIPTS
    if not transcripts.is_file():
        raise HParamsError(f"hparam 'transcripts': file {transcripts} not found: set transcripts=FILE (LJSpeech's "
                           "metadata.csv format, or one sentence per line)")
    return make_espeak_corpus(Path(data.espeak_dir), transcripts, data.n_utterances or None, seed=0)


DATASET_FILELISTS = {"demo": demo_filelists, "ljspeech": ljspeech_filelists, "filelist": user_filelists,
                     "espeak": espeak_filelists}
DATASETS = tuple(DATASET_FILELISTS)


def corpus_filelists(data: DataConfig, mel: MelConfig) -> tuple[Path, Path]:
    """The (train, validation) filelists of the configured corpus, generated first if needed."""
    return DATASET_FILELISTS[data.dataset](data, mel)


def build_datasets(paths: tuple[Path, Path], data: DataConfig, mel: MelConfig,
                   progress: bool = True) -> tuple[TextMelDataset, TextMelDataset]:
    """Datasets whose `.frames` (from the filelist) are the lengths the batch planner uses."""
    cache = Path(data.mel_cache_dir) if data.mel_cache_dir else None
    sets = tuple(TextMelDataset(read_filelist(path), mel, cache_dir=cache) for path in paths)
    if cache is not None:
        for dataset in sets:
            precompute_mels(dataset, progress=progress)
    return sets
