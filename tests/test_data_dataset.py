from pathlib import Path

import numpy as np
import pytest
import torch

from data.audio import MelConfig, n_frames, save_wav
from data.dataset import (
    CacheFill,
    FramesMismatchError,
    NonFiniteFeaturesError,
    TextMelDataset,
    build_datasets,
    precompute_mels,
)
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
    with pytest.raises(
        NonFiniteFeaturesError,
        match=rf"^{tmp_path / 'list.txt'}:1: the mel of .*nan\.wav holds \d+ "
        r"non-finite value\(s\).*; re-export the clip",
    ):
        precompute_mels(dataset, progress=False)
    assert not list((tmp_path / "mels").glob("*.npy"))


def test_unknown_symbols_are_reported_per_file(two_wavs):
    bad = [Utterance(Path("x.wav"), "a | b", 3), Utterance(Path("y.wav"), "c { d", 3)]
    with pytest.raises(UnknownSymbolError, match=r"2 texts(.|\n)*x\.wav(.|\n)*y\.wav"):
        TextMelDataset(two_wavs + bad)


def test_cache_is_filled_once_and_matches(two_wavs, tmp_path):
    cache = tmp_path / "cache"
    dataset = TextMelDataset(two_wavs, cache_dir=cache)
    assert precompute_mels(dataset, progress=False) == CacheFill(2, [])
    assert precompute_mels(dataset, progress=False) == CacheFill(0, [])
    assert len(list(cache.glob("*.npy"))) == 2
    torch.testing.assert_close(dataset[0][1], TextMelDataset(two_wavs)[0][1])
    cached = TextMelDataset(two_wavs, cache_dir=cache)
    assert [cached[i][1].shape[1] for i in (0, 1)] == [u.frames for u in two_wavs]
    assert "_extractor" not in vars(cached)  # all cached: no filter bank built (librosa.filters is slow to import)
    other_cfg = TextMelDataset(two_wavs, MelConfig(fmax=7600.0), cache_dir=cache)
    assert other_cfg.cache_path(0) != dataset.cache_path(0)


def test_precompute_needs_a_cache(two_wavs):
    with pytest.raises(ValueError, match="cache_dir"):
        precompute_mels(TextMelDataset(two_wavs))


# ---------------------------------------------------------------- a cache that heals


def damage_by_truncating(path: Path, fraction: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])


def damage(path: Path, how: str) -> None:
    """Overwrite a cache entry with something that is not the mel it stands for."""
    mel = np.load(path)
    if how == "garbage":
        path.write_bytes(b"\x93NUMPY garbage" * 50)
    elif how == "text":
        path.write_text("not an array")
    elif how == "wrong shape":
        np.save(path, mel[:, :3])
    elif how == "wrong dtype":
        np.save(path, mel.astype(np.float64))
    elif how == "padded":
        path.write_bytes(path.read_bytes() + b"\0" * 8)
    elif how == "non-finite":
        mel[0, 0] = np.nan
        np.save(path, mel)


def filled_cache(two_wavs, tmp_path) -> tuple[TextMelDataset, torch.Tensor]:
    dataset = TextMelDataset(two_wavs, cache_dir=tmp_path / "cache")
    precompute_mels(dataset, progress=False)
    return dataset, TextMelDataset(two_wavs)[1][1]


TRUNCATIONS = (0.0, 0.01, 0.05, 0.1, 0.5, 0.99)  # empty, inside the magic, the header, the data, its last byte
DAMAGES = ("garbage", "text", "wrong shape", "wrong dtype", "padded")


@pytest.mark.parametrize("fraction", TRUNCATIONS)
def test_a_truncated_cache_entry_is_recomputed_up_front_and_counted(two_wavs, tmp_path, fraction):
    dataset, fresh = filled_cache(two_wavs, tmp_path)
    damage_by_truncating(dataset.cache_path(1), fraction)
    fill = precompute_mels(dataset, progress=False)
    assert fill.computed == 1 and len(fill.healed) == 1 and fill.healed[0].startswith(str(dataset.cache_path(1)))
    torch.testing.assert_close(torch.from_numpy(np.load(dataset.cache_path(1))), fresh, rtol=0, atol=0)
    assert precompute_mels(dataset, progress=False) == CacheFill(0, [])  # rewritten: whole again


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_or_mismatched_cache_entry_is_recomputed_up_front(two_wavs, tmp_path, how):
    dataset, fresh = filled_cache(two_wavs, tmp_path)
    damage(dataset.cache_path(1), how)
    fill = precompute_mels(dataset, progress=False)
    assert fill.computed == 1 and len(fill.healed) == 1
    torch.testing.assert_close(dataset[1][1], fresh, rtol=0, atol=0)


READ_DAMAGES = [d for d in DAMAGES if d != "padded"]  # np.load reads a padded entry's mel whole and right


@pytest.mark.parametrize("how", [*READ_DAMAGES, "non-finite", *(f"truncated {f}" for f in TRUNCATIONS)])
def test_an_entry_damaged_during_the_run_is_recomputed_when_read(two_wavs, tmp_path, capsys, how):
    """A mel read in training (not through precompute) heals too, one line on stderr each time."""
    dataset, fresh = filled_cache(two_wavs, tmp_path)
    path = dataset.cache_path(1)
    if how.startswith("truncated"):
        damage_by_truncating(path, float(how.split()[1]))
    else:
        damage(path, how)
    torch.testing.assert_close(dataset[1][1], fresh, rtol=0, atol=0)
    assert capsys.readouterr().err.startswith(f"mel cache: {path} ")
    torch.testing.assert_close(torch.from_numpy(np.load(path)), fresh, rtol=0, atol=0)
    dataset[1]
    assert capsys.readouterr().err == ""  # healed once, read from the cache afterwards


def test_the_run_log_counts_the_healed_entries(two_wavs, tmp_path, capsys):
    (tmp_path / "list.txt").write_text("".join(f"{u.path.name}|{u.text}|{u.frames}\n" for u in two_wavs))
    build_datasets((tmp_path / "list.txt", tmp_path / "list.txt"), MelConfig(), tmp_path / "cache", progress=False)
    dataset = TextMelDataset(two_wavs, cache_dir=tmp_path / "cache")
    for index in range(2):
        damage_by_truncating(dataset.cache_path(index), 0.5)
    capsys.readouterr()
    build_datasets((tmp_path / "list.txt", tmp_path / "list.txt"), MelConfig(), tmp_path / "cache", progress=False)
    err = capsys.readouterr().err
    assert err.startswith("mel cache: 2 damaged or mismatched entries recomputed and rewritten:")
    assert str(dataset.cache_path(0)) in err and str(dataset.cache_path(1)) in err
