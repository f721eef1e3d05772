"""The eSpeak NG corpus: real English speech made on the machine (needs the espeakng-loader package)."""

import json

import numpy as np
import pytest

pytest.importorskip(
    "espeakng_loader",
    reason="eSpeak NG comes from the PyPI package espeakng-loader, which is not "
    "installed: pip install -r requirements.txt",
)

import data.corpora.espeak as espeak  # noqa: E402  (after the skip)
from data.audio import wav_info  # noqa: E402
from data.corpora.errors import CorpusError  # noqa: E402
from data.corpora.espeak import make_espeak_corpus, read_transcripts  # noqa: E402
from data.corpora.espeak_engine import DEFAULT_RATE_WPM, speak  # noqa: E402
from data.filelist import read_filelist  # noqa: E402
from data.text import clean_text  # noqa: E402

SENTENCES = [
    "Mr. Smith was taken to Newgate in 1862.",
    "The prisoner said nothing.",
    "In being comparatively modern.",
    "Dr. Brown paid 5 pounds on the 16th of May.",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Four sentences, two pool workers, one utterance for validation."""
    root = tmp_path_factory.mktemp("espeak")
    transcripts = root / "sentences.txt"
    transcripts.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = root / "corpus"
    paths = make_espeak_corpus(
        out, transcripts, n_utterances=None, seed=0, val_fraction=0.25, workers=2, progress=False
    )
    return out, transcripts, paths


def _stamps(out):
    return {p.name: p.stat().st_mtime_ns for p in [*out.glob("*.txt"), out / "manifest.json", *out.glob("wavs/*")]}


def test_wavs_filelists_and_split(corpus):
    out, _, (train_path, val_path) = corpus
    train, val = read_filelist(train_path), read_filelist(val_path)
    assert (len(train), len(val)) == (3, 1)
    assert sorted(u.text for u in train + val) == sorted(SENTENCES), "the filelist keeps the original text"
    assert sorted(p.name for p in (out / "wavs").iterdir()) == [f"line{i:05d}.wav" for i in range(1, 5)]
    for utt in train + val:
        sample_rate, channels, n_samples = wav_info(utt.path)
        assert (sample_rate, channels) == (22050, 1)
        assert utt.frames == 1 + n_samples // 276
        assert 1.0 < n_samples / sample_rate < 6.0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rate_wpm"] == DEFAULT_RATE_WPM and manifest["espeakng_loader"]


def test_speaks_the_cleaned_text(corpus):
    """eSpeak says the front end's words ('mister', 'eighteen sixty-two'): sample counts depend on
    the text alone, so a WAV is as long as speak() of its cleaned transcript."""
    _, _, (train_path, val_path) = corpus
    for utt in read_filelist(train_path) + read_filelist(val_path):
        assert wav_info(utt.path)[2] == len(speak(clean_text(utt.text), DEFAULT_RATE_WPM))
    assert "mister smith" in clean_text(SENTENCES[0]) and "eighteen sixty-two" in clean_text(SENTENCES[0])


def test_speak_returns_float_audio_at_the_rate_asked():
    slow, fast = speak("in being comparatively modern.", 100), speak("in being comparatively modern.", 200)
    assert slow.dtype == np.float32 and slow.ndim == 1 and 0.1 < np.abs(slow).max() <= 1.0
    assert 1.6 < len(slow) / len(fast) < 2.4
    with pytest.raises(ValueError, match="rate_wpm"):
        speak("hello", 20)


def test_second_call_reuses_the_corpus(corpus, monkeypatch):
    out, transcripts, paths = corpus
    before = _stamps(out)
    monkeypatch.setattr(espeak, "speak", lambda *args: pytest.fail("a complete corpus was synthesised again"))
    assert make_espeak_corpus(out, transcripts, None, seed=0, val_fraction=0.25, workers=2, progress=False) == paths
    assert _stamps(out) == before


def test_interrupted_corpus_resumes(tmp_path):
    """Only the WAV that is missing is made again, and the filelists come out the same."""
    transcripts = tmp_path / "sentences.txt"
    transcripts.write_text("\n".join(SENTENCES[:3]) + "\n", encoding="utf-8")
    train, val = make_espeak_corpus(
        tmp_path / "c", transcripts, 3, seed=1, val_fraction=0.34, workers=1, progress=False
    )
    listed = train.read_text(), val.read_text()
    (tmp_path / "c" / "manifest.json").unlink()
    (tmp_path / "c" / "wavs" / "line00002.wav").unlink()
    kept = (tmp_path / "c" / "wavs" / "line00001.wav").stat().st_mtime_ns
    make_espeak_corpus(tmp_path / "c", transcripts, 3, seed=1, val_fraction=0.34, workers=1, progress=False)
    assert (tmp_path / "c" / "wavs" / "line00002.wav").is_file()
    assert (tmp_path / "c" / "wavs" / "line00001.wav").stat().st_mtime_ns == kept
    assert (train.read_text(), val.read_text()) == listed


def test_transcript_formats(tmp_path):
    metadata = tmp_path / "metadata.csv"
    metadata.write_text("LJ001-0001|Mr. Jones, 1862|\nLJ001-0002|raw 2|two words\n", encoding="utf-8")
    assert [(t.id, t.text) for t in read_transcripts(metadata)] == [
        ("LJ001-0001", "Mr. Jones, 1862"),
        ("LJ001-0002", "two words"),
    ]
    tsv = tmp_path / "lengths.tsv"
    tsv.write_text("id\tsamples\tframes\ttext\nLJ001-0002\t41856\t152\tin being comparatively modern.\n")
    assert [(t.id, t.text) for t in read_transcripts(tsv)] == [("LJ001-0002", "in being comparatively modern.")]


def test_bad_lines_are_named(tmp_path):
    bad = tmp_path / "metadata.csv"
    bad.write_text("a|fine text|\nb|one|two|three\n\nc|{braces}|\na|again|\n", encoding="utf-8")
    with pytest.raises(CorpusError) as err:
        read_transcripts(bad)
    assert [p.split(": ")[0] for p in err.value.problems] == [f"{bad}:2", f"{bad}:4", f"{bad}:5"]
    assert "duplicate id a" in str(err.value)


def test_tsv_without_its_header_is_refused(tmp_path):
    headless = tmp_path / "lengths.tsv"
    headless.write_text("LJ001-0002\t41856\t152\tin being comparatively modern.\n")
    with pytest.raises(CorpusError, match=f"{headless}:1: a tab in a sentence"):
        read_transcripts(headless)
