"""Text + checkpoint -> mel (.npy), Griffin-Lim WAV and alignment PNG.

    python -m scripts.tools.synthesize --checkpoint runs/demo/checkpoint_best.pt --text "abc def" --out out/
    python -m scripts.tools.synthesize ... --max-decoder-steps 3000 --unknown-chars drop

Griffin-Lim is a vocoder-free preview of what the model learned, not production audio quality.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from batching.errors import UserError
from data.audio import griffin_lim, save_wav
from data.text import UNKNOWN_CHARS, UnknownSymbolError, text_to_sequence
from model import Tacotron2
from model.plotting import plot_alignment
from training.checkpoint import load_checkpoint
from training.config import resolve_config
from training.hparams import resume_hparams


@dataclass(frozen=True)
class Decoding:
    """How a sentence is read and decoded: the characters the symbol table lacks (data.text's
    UNKNOWN_CHARS, as the hparam unknown_chars), the decoder's step limit (None: the run's own),
    the Griffin-Lim iterations and the seed of the prenet's dropout."""

    unknown_chars: str = "error"
    max_decoder_steps: int | None = None
    griffin_lim_iters: int = 60
    seed: int = 0


def synthesize(checkpoint: Path, text: str, out_dir: Path, decoding: Decoding = Decoding()) -> dict:
    """Run inference for one sentence and write mel.npy, audio.wav, alignment.png into out_dir."""
    ckpt = load_checkpoint(checkpoint)
    cfg = resolve_config(resume_hparams(ckpt["hparams"], ""))  # the run's own model and mel settings
    model_cfg = cfg.model
    if decoding.max_decoder_steps is not None:
        model_cfg = dataclasses.replace(model_cfg, max_decoder_steps=decoding.max_decoder_steps)
    model = Tacotron2(model_cfg)
    model.load_state_dict(ckpt["model"])
    model.eval()
    torch.manual_seed(decoding.seed)  # the prenet keeps dropout at inference: seed it for repeatable output
    symbols = text_to_sequence(text, decoding.unknown_chars)
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
    wav = griffin_lim(mel, cfg.mel, n_iter=decoding.griffin_lim_iters)
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
    parser.add_argument(
        "--max-decoder-steps",
        type=int,
        help="stop decoding after this many steps (default: the run's model.max_decoder_steps)",
    )
    parser.add_argument(
        "--unknown-chars",
        choices=UNKNOWN_CHARS,
        default="error",
        help="characters the symbol table lacks: error (name them) or drop them, as the hparam unknown_chars",
    )
    args = parser.parse_args(argv)
    if args.max_decoder_steps is not None and args.max_decoder_steps < 1:
        print(f"error: --max-decoder-steps {args.max_decoder_steps}: must be >= 1", file=sys.stderr)
        return 2
    decoding = Decoding(args.unknown_chars, args.max_decoder_steps, args.griffin_lim_iters, args.seed)
    try:
        result = synthesize(args.checkpoint, args.text, args.out, decoding)
    except UserError as err:  # a user's mistake: one line (programming errors keep their tracebacks)
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"{result['frames']} frames ({result['seconds']:.2f} s) -> {result['out_dir']}/"
        f"{{mel.npy,audio.wav,alignment.png}}"
        + ("" if result["stopped_by_gate"] else " (hit max_decoder_steps: raise it with --max-decoder-steps)")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
