"""scripts/tools/synthesize.py: checkpoint + text -> mel, Griffin-Lim WAV, alignment PNG."""
import numpy as np
import soundfile

import train
from scripts.tools import synthesize as script
from tests.kit import tiny


def test_synthesis_writes_mel_wav_and_alignment(tmp_path, capsys, demo_corpus):
    assert train.main(["--hparams", tiny(tmp_path, "epochs=1,model.max_decoder_steps=12", demo_corpus)]) == 0
    out = tmp_path / "synth"
    assert script.main(["--checkpoint", str(tmp_path / "run" / "checkpoint_last.pt"), "--text", "Dr. Smith paid $5.",
                        "--out", str(out), "--griffin-lim-iters", "4"]) == 0
    printed = capsys.readouterr()
    mel = np.load(out / "mel.npy")
    assert mel.shape[0] == 80 and 0 < mel.shape[1] <= 12 * 2  # r = 2 frames per decoder step
    wav, sr = soundfile.read(out / "audio.wav")
    assert sr == 22050 and len(wav) > 0
    assert (out / "alignment.png").stat().st_size > 0
    hit_limit = mel.shape[1] == 24  # an untrained gate rarely fires; either way it must be reported right
    assert ("max_decoder_steps=12" in printed.err) == hit_limit
    assert ("hit max_decoder_steps" in printed.out) == hit_limit


def test_synthesis_errors_are_one_line(tmp_path, capsys):
    assert script.main(["--checkpoint", str(tmp_path / "missing.pt"), "--text", "hello"]) == 2
    assert "no checkpoint at" in capsys.readouterr().err
