"""scripts/tools/synthesize.py: checkpoint + text -> mel, Griffin-Lim WAV, alignment PNG."""

import numpy as np
import pytest
import soundfile

import train
from model import Tacotron2
from scripts.tools import synthesize as script
from tests.kit import tiny


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, demo_corpus):
    """One tiny model trained for an epoch, shared by the tests that synthesise from it."""
    where = tmp_path_factory.mktemp("synthesis")
    assert train.main(["--hparams", tiny(where, "epochs=1,model.max_decoder_steps=12", demo_corpus)]) == 0
    return where / "run" / "checkpoint_last.pt"


def test_synthesis_writes_mel_wav_and_alignment(tmp_path, capsys, checkpoint):
    out = tmp_path / "synth"
    assert (
        script.main(
            [
                "--checkpoint",
                str(checkpoint),
                "--text",
                "Dr. Smith paid $5.",
                "--out",
                str(out),
                "--griffin-lim-iters",
                "4",
            ]
        )
        == 0
    )
    printed = capsys.readouterr()
    mel = np.load(out / "mel.npy")
    assert mel.shape[0] == 80 and 0 < mel.shape[1] <= 12 * 2  # r = 2 frames per decoder step
    wav, sr = soundfile.read(out / "audio.wav")
    assert sr == 22050 and len(wav) > 0
    assert (out / "alignment.png").stat().st_size > 0
    hit_limit = mel.shape[1] == 24  # an untrained gate rarely fires; either way it must be reported right
    assert ("max_decoder_steps=12" in printed.err) == hit_limit
    assert ("hit max_decoder_steps" in printed.out) == hit_limit


def test_a_one_frame_synthesis_is_silence_with_a_warning(tmp_path, capsys, checkpoint, monkeypatch):
    """A gate that fires on the first frame: Griffin-Lim cannot run on one frame, so the WAV is one
    hop of silence and stderr says why, instead of librosa's traceback."""
    inference = Tacotron2.inference

    def first_frame_only(self, text, text_lengths=None):
        out = inference(self, text, text_lengths)
        return out._replace(
            mel_postnet=out.mel_postnet[:, :, :1], gate=out.gate[:, :1], alignments=out.alignments[:, :1]
        )

    monkeypatch.setattr(Tacotron2, "inference", first_frame_only)
    out = tmp_path / "synth"
    assert (
        script.main(["--checkpoint", str(checkpoint), "--text", "hello", "--out", str(out), "--griffin-lim-iters", "2"])
        == 0
    )
    err = capsys.readouterr().err
    assert "stopped the decoder after 1 frame(s)" in err and "Traceback" not in err
    wav, sr = soundfile.read(out / "audio.wav")
    assert np.load(out / "mel.npy").shape == (80, 1) and len(wav) == 276 and not wav.any()


def test_synthesis_errors_are_one_line(tmp_path, capsys):
    assert script.main(["--checkpoint", str(tmp_path / "missing.pt"), "--text", "hello"]) == 2
    assert "no checkpoint at" in capsys.readouterr().err


def test_max_decoder_steps_and_unknown_chars_as_options(tmp_path, capsys, checkpoint):
    """--max-decoder-steps caps the run's limit (12 steps here); --unknown-chars drop reads a text
    that the default (error, as the hparam unknown_chars) refuses."""
    argv = ["--checkpoint", str(checkpoint), "--text", "hi ~ there", "--out", str(tmp_path), "--griffin-lim-iters", "2"]
    assert script.main(argv) == 2
    assert "unknown_chars=drop" in capsys.readouterr().err
    assert script.main([*argv, "--unknown-chars", "drop", "--max-decoder-steps", "3"]) == 0
    assert 0 < np.load(tmp_path / "mel.npy").shape[1] <= 3 * 2  # r = 2 frames per decoder step
