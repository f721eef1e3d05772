from pathlib import Path

import numpy as np
import pytest
import torch

from data.audio import MelConfig, n_frames, save_wav
from data.dataset import FramesMismatchError, NonFiniteFeaturesError, TextMelDataset, precompute_mels
from data.filelist import Utterance, read_filelist
from data.text import UnknownSymbolError, text_to_sequence


@pytest.fixture
def two_wavs(tmp_path) -> list[Utterance]:
    rng = np.random.default_rng(0)
    utterances = []
    for name, n in [("a.wav", 5000), ("b.wav", 9000)]:
        save_wav(tmp_path / name, rng.uniform(-0.3, 0.3, n))
        utterances.append(Utterance(tmp_path / name, f"Clip {name[0]}.", n_frames(n)))
    return utterances


def test_items_and_lengths(two_wavs):
    dataset = TextMelDataset(two_wavs, MelConfig())
    text, mel = dataset[1]
    assert text.dtype == torch.long and text.tolist() == text_to_sequence("Clip b.")
    assert mel.shape == (80, n_frames(9000)) and mel.dtype == torch.float32
    assert dataset.frames.dtype == np.int64 and dataset.frames.tolist() == [n_frames(5000), n_frames(9000)]
    assert dataset.text_lengths.tolist() == [len("clip a."), len("clip b.")]


def test_frames_mismatch_names_file_and_both_counts(two_wavs):
    wrong = [two_wavs[0], Utterance(two_wavs[1].path, "b", 99)]
    with pytest.raises(FramesMismatchError, match=rf"b\.wav.*{n_frames(9000)} frames.*says 99"):
        TextMelDataset(wrong)[1]


def test_a_clip_whose_mel_is_not_finite_is_named_by_its_filelist_line_and_never_cached(tmp_path):
    import soundfile as sf

    samples = np.random.default_rng(0).uniform(-0.3, 0.3, 4410).astype(np.float32)
    samples[100] = np.nan
    sf.write(str(tmp_path / "nan.wav"), samples, 22050, subtype="FLOAT")
    (tmp_path / "list.txt").write_text(f"nan.wav|Clip.|{n_frames(4410)}\n")
    dataset = TextMelDataset(read_filelist(tmp_path / "list.txt"), cache_dir=tmp_path / "mels")
    with pytest.raises(NonFiniteFeaturesError, match=rf"^{tmp_path / 'list.txt'}:1: the mel of .*nan\.wav holds \d+ "
                                                     r"non-finite value\(s\).*; re-export the clip"):
        precompute_mels(dataset, progress=False)
    assert not list((tmp_path / "mels").glob("*.npy"))


def test_unknown_symbols_are_reported_per_file(two_wavs):
    bad = [Utterance(Path("x.wav"), "a & b", 3), Utterance(Path("y.wav"), "c @ d", 3)]
    with pytest.raises(UnknownSymbolError, match=r"2 texts(.|\n)*x\.wav(.|\n)*y\.wav"):
        TextMelDataset(two_wavs + bad)


def test_cache_is_filled_once_and_matches(two_wavs, tmp_path):
    cache = tmp_path / "cache"
    dataset = TextMelDataset(two_wavs, cache_dir=cache)
    assert precompute_mels(dataset, progress=False) == 2
    assert precompute_mels(dataset, progress=False) == 0
    assert len(list(cache.glob("*.npy"))) == 2
    torch.testing.assert_close(dataset[0][1], TextMelDataset(two_wavs)[0][1])
    other_cfg = TextMelDataset(two_wavs, MelConfig(fmax=7600.0), cache_dir=cache)
    assert other_cfg.cache_path(0) != dataset.cache_path(0)


def test_precompute_needs_a_cache(two_wavs):
    with pytest.raises(ValueError, match="cache_dir"):
        precompute_mels(TextMelDataset(two_wavs))
