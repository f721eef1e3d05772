import librosa
import numpy as np
import pytest
import soundfile as sf
import torch

from data.audio import AudioFormatError, MelConfig, MelExtractor, griffin_lim, load_wav, n_frames, save_wav, wav_info
from data.filelist import wav_frames

CFG = MelConfig()


def librosa_log_mel(wav: np.ndarray) -> np.ndarray:
    """The reference, computed independently with librosa's own STFT and filter bank."""
    mel = librosa.feature.melspectrogram(
        y=wav,
        sr=CFG.sample_rate,
        n_fft=CFG.n_fft,
        hop_length=CFG.hop_length,
        win_length=CFG.win_length,
        window="hann",
        center=True,
        pad_mode="reflect",
        power=1.0,
        n_mels=CFG.n_mels,
        fmin=CFG.fmin,
        fmax=CFG.fmax,
        htk=False,
        norm="slaney",
    )
    return np.log(np.maximum(mel, CFG.clamp))


def test_paper_settings():
    assert (CFG.sample_rate, CFG.win_length, CFG.hop_length, CFG.n_fft, CFG.n_mels) == (22050, 1103, 276, 2048, 80)
    assert round(CFG.win_length / CFG.sample_rate, 3) == 0.050 and round(CFG.hop_length / CFG.sample_rate, 4) == 0.0125
    assert (CFG.fmin, CFG.fmax, CFG.clamp) == (0, 8000, 1e-5)


def test_mels_of_real_clips_match_librosa(ljspeech_mini):
    extractor = MelExtractor(CFG)
    wavs = sorted((ljspeech_mini / "wavs").glob("*.wav"))
    assert len(wavs) >= 30  # 32 unless the fixture had to leave damaged clips out (it warns)
    for path in wavs:
        wav = load_wav(path)
        mel = extractor(wav)
        assert mel.dtype == torch.float32 and mel.shape == (80, n_frames(len(wav))) == (80, wav_frames(path))
        reference = librosa_log_mel(wav)
        # float32 rounding differs between the two STFTs; it matters only near the clamp floor.
        np.testing.assert_allclose(mel.numpy(), reference, atol=1e-2, err_msg=str(path))
        np.testing.assert_allclose(np.exp(mel.numpy()), np.exp(reference), rtol=1e-3, atol=1e-6, err_msg=str(path))


def test_frames_from_header_equal_mel_frames_for_every_length():
    extractor = MelExtractor(CFG)
    for n in [1025, 1100, 275 * 4, 276 * 7, 276 * 7 + 275, 22050]:
        assert extractor(np.zeros(n, np.float32)).shape[-1] == n_frames(n)


def test_ljspeech_lengths_follow_the_frame_formula(ljspeech_lengths_tsv):
    rows = [line.split("\t") for line in ljspeech_lengths_tsv.read_text(encoding="utf-8").splitlines()[1:]]
    assert all(n_frames(int(samples)) == int(frames) for _, samples, frames, _ in rows)


def test_extractor_accepts_tensor_and_batch():
    wav = np.random.default_rng(0).uniform(-0.5, 0.5, 5000).astype(np.float32)
    single = MelExtractor(CFG)(torch.from_numpy(wav))
    batch = MelExtractor(CFG)(np.stack([wav, wav]))
    assert batch.shape == (2, 80, n_frames(5000))
    torch.testing.assert_close(batch[1], single)


def test_too_short_audio_is_a_clear_error():
    with pytest.raises(ValueError, match="too short"):
        MelExtractor(CFG)(np.zeros(1000, np.float32))


def test_load_wav_errors_name_the_file(tmp_path):
    sf.write(tmp_path / "low.wav", np.zeros(4000), 16000, subtype="PCM_16")
    sf.write(tmp_path / "stereo.wav", np.zeros((4000, 2)), 22050, subtype="PCM_16")
    (tmp_path / "junk.wav").write_bytes(b"not a wav at all")
    for name, message in [
        ("low.wav", "16000 Hz, expected 22050"),
        ("stereo.wav", "2 channels"),
        ("junk.wav", "cannot read"),
        ("absent.wav", "cannot read"),
    ]:
        with pytest.raises(AudioFormatError, match=f"{name}.*{message}"):
            load_wav(tmp_path / name)


def test_save_and_load_round_trip(tmp_path):
    wav = np.sin(np.linspace(0, 200, 3000)).astype(np.float32) * 0.5
    save_wav(tmp_path / "sub" / "a.wav", np.append(wav, 3.0))
    loaded = load_wav(tmp_path / "sub" / "a.wav")
    assert wav_info(tmp_path / "sub" / "a.wav") == (22050, 1, 3001)
    np.testing.assert_allclose(loaded[:-1], wav, atol=1e-4)
    assert loaded[-1] == pytest.approx(1.0, abs=1e-4)


def test_griffin_lim_recovers_a_tone():
    t = np.arange(11025) / CFG.sample_rate
    wav = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    audio = griffin_lim(MelExtractor(CFG)(wav), CFG, n_iter=8)
    assert abs(len(audio) - len(wav)) < CFG.hop_length
    spectrum = np.abs(np.fft.rfft(audio))
    assert abs(np.argmax(spectrum) * CFG.sample_rate / len(audio) - 440) < 30
