"""Text + checkpoint -> mel (.npy), Griffin-Lim WAV and alignment PNG.

    python -m scripts.tools.synthesize --checkpoint runs/demo/checkpoint_best.pt --text "abc def" --out out/

Griffin-Lim is a vocoder-free preview of what the model learned, not production audio quality.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

from batching.errors import UserError
from data.audio import griffin_lim, save_wav
from data.text import UnknownSymbolError, text_to_sequence
from model import Tacotron2
from model.plotting import plot_alignment
from training.checkpoint import load_checkpoint
from training.config import resolve_config
from training.hparams import resume_hparams


def synthesize(checkpoint: Path, text: str, out_dir: Path, griffin_lim_iters: int = 60, seed: int = 0) -> dict:
    """Run inference for one sentence and write mel.npy, audio.wav, alignment.png into out_dir."""
    ckpt = load_checkpoint(checkpoint)
    cfg = resolve_config(resume_hparams(ckpt["hparams"], ""))  # the run's own model and mel settings
    model = Tacotron2(cfg.model)
    model.load_state_dict(ckpt["model"])
    model.eval()
    torch.manual_seed(seed)  # the prenet keeps dropout at inference: seed it for repeatable output
    symbols = text_to_sequence(text)
    if not symbols:
        raise UnknownSymbolError(f"--text {text!r} cleans to nothing: give it some words")
    ids = torch.tensor([symbols], dtype=torch.long)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mel, gate, alignment = model.inference(ids)
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    mel = mel[0].cpu().numpy()
    out_dir.mkdir(parents=True, exist_ok=True)
    np.save(out_dir / "mel.npy", mel)
    wav = griffin_lim(mel, cfg.mel, n_iter=griffin_lim_iters)
    if mel.shape[1] < 2:
        print(
            f"warning: the gate stopped the decoder after {mel.shape[1]} frame(s): the model has not learned "
            f"when to stop yet (train longer); audio.wav is {len(wav)} samples of silence",
            file=sys.stderr,
        )
    save_wav(out_dir / "audio.wav", wav, cfg.mel.sample_rate)
    fig = plot_alignment(alignment[0].cpu().numpy(), f"{checkpoint.name}: {text[:60]}")
    fig.savefig(out_dir / "alignment.png", dpi=100, bbox_inches="tight")
    return {
        "frames": mel.shape[1],
        "seconds": len(wav) / cfg.mel.sample_rate,
        "out_dir": str(out_dir),
        "stopped_by_gate": not caught,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--out", type=Path, default=Path("synth"))
    parser.add_argument("--griffin-lim-iters", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        result = synthesize(args.checkpoint, args.text, args.out, args.griffin_lim_iters, args.seed)
    except UserError as err:  # a user's mistake: one line (programming errors keep their tracebacks)
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"{result['frames']} frames ({result['seconds']:.2f} s) -> {result['out_dir']}/"
        f"{{mel.npy,audio.wav,alignment.png}}" + ("" if result["stopped_by_gate"] else " (hit max_decoder_steps)")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
