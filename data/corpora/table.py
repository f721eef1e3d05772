"""The corpus table and the corpus settings: from the `dataset` hparam to (train, validation) filelists.

CORPUS_TABLE is the one table of corpora (how to add one: data/corpora/__init__.py). A row's
`filelists` returns the filelists of a DataConfig, generating the corpus first where the project
makes it itself. DataConfig validates the corpus settings against the table, so nothing outside
this package names a corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from data.audio import MelConfig
from data.corpora.demo import make_demo_corpus
from data.corpora.errors import CorpusError
from data.corpora.espeak import make_espeak_corpus
from data.filelist import FilelistError
from data.shared import LJSPEECH_LENGTHS
from data.text import UNKNOWN_CHARS

REPO = Path(__file__).resolve().parents[2]
LJSPEECH_FILELISTS = (REPO / "filelists" / "ljspeech_train.txt", REPO / "filelists" / "ljspeech_val.txt")


@dataclass(frozen=True)
class DataConfig:
    """Which corpus: its filelists, or where the project generates it; the mel cache."""

    dataset: str
    train_filelist: str
    val_filelist: str
    demo_dir: str
    demo_utterances: int
    espeak_dir: str
    transcripts: str
    n_utterances: int | None
    mel_cache_dir: str
    unknown_chars: str  # characters the symbol table lacks after cleaning: data.text.UNKNOWN_CHARS

    def __post_init__(self) -> None:
        if self.unknown_chars not in UNKNOWN_CHARS:
            raise CorpusError(
                f"hparam 'unknown_chars': {self.unknown_chars!r} is not one of "
                f"{', '.join(UNKNOWN_CHARS)} (error: stop naming each line; drop: drop them, counted)"
            )
        if self.dataset not in CORPUS_TABLE:
            raise CorpusError(
                f"hparam 'dataset': '{self.dataset}' is not one of "
                + ", ".join(f"{c.name} ({c.summary})" for c in CORPUS_TABLE.values())
            )
        if self.demo_utterances <= 0:
            raise CorpusError(f"hparam 'demo_utterances': {self.demo_utterances} must be > 0")
        if self.n_utterances is not None and (
            isinstance(self.n_utterances, bool) or not isinstance(self.n_utterances, int) or self.n_utterances < 1
        ):
            raise CorpusError(
                f"hparam 'n_utterances': {self.n_utterances!r} must be an integer >= 1, or null for all the transcripts"
            )
        needs = CORPUS_TABLE[self.dataset].needs
        if not all(getattr(self, key) for key in needs):
            raise CorpusError(f"dataset={self.dataset} needs " + " and ".join(f"{key}=PATH" for key in needs))


@dataclass(frozen=True)
class Corpus:
    """One corpus: how its filelists are had, and the settings it cannot do without."""

    name: str
    filelists: Callable[[DataConfig, MelConfig], tuple[Path, Path]]
    summary: str
    needs: tuple[str, ...] = ()  # DataConfig fields that must be set (paths)


def _at_native_mel(mel: MelConfig, made: str, instead: str = "") -> None:
    """A generated corpus is made at the paper's sample rate and hop (MelConfig's defaults) only."""
    native = MelConfig()
    if (mel.sample_rate, mel.hop_length) != (native.sample_rate, native.hop_length):
        raise CorpusError(
            f"{made} at {native.sample_rate} Hz with a 12.5 ms hop, not sample_rate={mel.sample_rate} "
            f"with a {mel.hop_length}-sample hop; leave sample_rate and hop_ms at their defaults for "
            f"it{instead}"
        )


def demo_filelists(data: DataConfig, mel: MelConfig) -> tuple[Path, Path]:
    """The embedded demo corpus, generated once (rendered at the paper's mel settings)."""
    _at_native_mel(mel, "dataset=demo is rendered", " (or use dataset=filelist with your own clips)")
    return make_demo_corpus(Path(data.demo_dir), n_utterances=data.demo_utterances, seed=0)


def ljspeech_filelists(data: DataConfig, mel: MelConfig) -> tuple[Path, Path]:
    """filelists/ljspeech_{train,val}.txt from scripts/tools/prepare_ljspeech.py (or the ones named)."""
    if data.train_filelist or data.val_filelist:
        return user_filelists(data, mel)
    return _existing(
        LJSPEECH_FILELISTS, "run `python -m scripts.tools.prepare_ljspeech --ljspeech /path/to/LJSpeech-1.1` first"
    )


def user_filelists(data: DataConfig, mel: MelConfig) -> tuple[Path, Path]:
    """The user's own `wav|text|frames` filelists."""
    return _existing((Path(data.train_filelist), Path(data.val_filelist)), "check train_filelist / val_filelist")


def _existing(paths: tuple[Path, Path], hint: str) -> tuple[Path, Path]:
    for path in paths:
        if not path.is_file():
            raise FilelistError(f"filelist {path} not found: {hint}")
    return paths


def espeak_filelists(data: DataConfig, mel: MelConfig) -> tuple[Path, Path]:
    """English speech the project generates with eSpeak NG (espeak.py) from `transcripts`
    (default: the 13,100 LJSpeech transcripts in ../shared beside the checkout), once."""
    _at_native_mel(mel, "dataset=espeak is synthesised")
    transcripts = Path(data.transcripts) if data.transcripts else LJSPEECH_LENGTHS
    if not transcripts.is_file():
        raise CorpusError(
            f"hparam 'transcripts': file {transcripts} not found: set transcripts=FILE (LJSpeech's "
            "metadata.csv format, or one sentence per line)"
        )
    return make_espeak_corpus(Path(data.espeak_dir), transcripts, data.n_utterances, seed=0)


CORPUS_TABLE: dict[str, Corpus] = {
    c.name: c
    for c in (
        Corpus("demo", demo_filelists, "tones for letters, generated here"),
        Corpus("ljspeech", ljspeech_filelists, "LJSpeech-1.1 via scripts.tools.prepare_ljspeech"),
        Corpus(
            "filelist", user_filelists, "your own wav|text|frames filelists", needs=("train_filelist", "val_filelist")
        ),
        Corpus("espeak", espeak_filelists, "English speech generated here with eSpeak NG"),
    )
}
CORPORA = tuple(CORPUS_TABLE)


def corpus_filelists(data: DataConfig, mel: MelConfig) -> tuple[Path, Path]:
    """The (train, validation) filelists of the configured corpus, generated first if needed."""
    return CORPUS_TABLE[data.dataset].filelists(data, mel)
