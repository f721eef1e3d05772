import json

import numpy as np
import pytest
from torch.utils.data import DataLoader

from data.audio import MelExtractor, load_wav
from data.collate import TextMelCollate
from data.corpora.demo import ALPHABET, MAX_FRAMES, demo_texts, letter_frames, make_demo_corpus, render, text_frames
from data.dataset import TextMelDataset
from data.filelist import read_filelist, wav_frames
from data.text import sequence_to_text, text_to_sequence


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    return out, make_demo_corpus(out, n_utterances=20, seed=3, val_fraction=0.25)


def test_split_and_consistent_frames(small_corpus):
    out, (train_path, val_path) = small_corpus
    train, val = read_filelist(train_path), read_filelist(val_path)
    assert (len(train), len(val)) == (15, 5)
    assert len({u.path for u in train + val}) == 20
    for utt in train + val:
        assert utt.frames == wav_frames(utt.path) == text_frames(utt.text)
        assert sequence_to_text(text_to_sequence(utt.text)) == utt.text
        assert set(utt.text) <= set(ALPHABET + " ,.")
    wav = load_wav(train[0].path)
    assert MelExtractor()(wav).shape[-1] == train[0].frames
    assert 0.3 < np.abs(wav).max() <= 0.5


def test_deterministic_and_reused(small_corpus, tmp_path):
    out, (train_path, _) = small_corpus
    stamp = train_path.stat().st_mtime_ns
    assert make_demo_corpus(out, n_utterances=20, seed=3, val_fraction=0.25)[0] == train_path
    assert train_path.stat().st_mtime_ns == stamp, "a complete corpus must be reused, not rewritten"
    again, _ = make_demo_corpus(tmp_path, n_utterances=20, seed=3, val_fraction=0.25)
    assert again.read_text() == train_path.read_text()
    assert (tmp_path / "wavs" / "demo_0007.wav").read_bytes() == (out / "wavs" / "demo_0007.wav").read_bytes()


def test_changed_parameters_or_missing_wav_regenerate(tmp_path):
    make_demo_corpus(tmp_path, n_utterances=6, seed=0, val_fraction=0.5)
    (tmp_path / "wavs" / "demo_0002.wav").unlink()
    make_demo_corpus(tmp_path, n_utterances=6, seed=0, val_fraction=0.5)
    assert (tmp_path / "wavs" / "demo_0002.wav").is_file()
    make_demo_corpus(tmp_path, n_utterances=4, seed=1, val_fraction=0.5)
    assert json.loads((tmp_path / "manifest.json").read_text())["n_utterances"] == 4
    assert sorted(p.name for p in (tmp_path / "wavs").iterdir()) == [f"demo_{i:04d}.wav" for i in range(4)]


def test_empty_split_is_refused(tmp_path):
    with pytest.raises(ValueError, match="empty split"):
        make_demo_corpus(tmp_path, n_utterances=2, val_fraction=0.1)


def test_lengths_are_skewed_like_ljspeech():
    frames = np.array([text_frames(t) for t in demo_texts(400, seed=0)])
    assert frames.max() <= MAX_FRAMES and frames.min() >= 10
    assert 0.6 < frames.mean() / frames.max() < 0.72  # LJSpeech: 0.65
    assert np.median(frames) > frames.mean()  # the long tail is on the short side
    assert np.percentile(frames, 95) / frames.max() > 0.9


def test_every_letter_sounds_different():
    """The mapping is learnable only if each letter has its own spectrum."""
    extractor = MelExtractor()
    centre_frames = []
    for letter in ALPHABET:
        mel = extractor(render(letter * 2))
        assert 3 <= letter_frames(letter) <= 6
        centre_frames.append(mel[:, 2 + letter_frames(letter) // 2].numpy())
    spectra = np.stack(centre_frames)
    distances = np.linalg.norm(spectra[:, None] - spectra[None], axis=-1)
    assert distances[~np.eye(len(ALPHABET), dtype=bool)].min() > 8.0


def test_loader_batches_match_the_filelist(small_corpus):
    _, (train_path, _) = small_corpus
    dataset = TextMelDataset(read_filelist(train_path))
    batch = next(iter(DataLoader(dataset, batch_size=4, collate_fn=TextMelCollate())))
    assert batch.mel_lengths.tolist() == dataset.frames[:4].tolist()
    assert batch.text_lengths.tolist() == dataset.text_lengths[:4].tolist()
    assert batch.mel.shape == (4, 80, dataset.frames[:4].max())
