"""How much fits on the GPU, for the recipe's LJSpeech run (the full model, graphed): whether B0 = 128
fits, with a CUDA memory snapshot of its probe steps (the capture of their graphs included), and what
batch_size=auto finds (training/auto_batch.py's probe, uncached). The GPU window runs each as a process
of its own (CUDA only: on the CPU a run takes the paper's 16 without a probe):

    python -m scripts.release.gpu_check.capacity snapshot --b0 128 --out runs/window/memory-b0-128.pickle
    python -m scripts.release.gpu_check.capacity probe

The snapshot opens in https://pytorch.org/memory_viz. The training lengths are bench.step's: the
paper's 80 % training split of the LJSpeech lengths (`--lengths`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from batching import train_split
from batching.errors import UserError
from data.shared import LJSPEECH_LENGTHS
from scripts.bench.steps import read_frames_and_texts, symbol_counts
from training.auto_batch import CudaGauge, ProbeSetup, fits, probe_b0
from training.config import resolve_config
from training.hparams import load_hparams

#: The recipe's LJSpeech run as batch_size=auto sees it (graph_bucket auto: 64, cuda_graphs auto: on)
RUN = "dataset=ljspeech,model_preset=full,batch_size=auto"
#: Allocation events the snapshot keeps (the newest): a B0 128 step's capture makes about this many
SNAPSHOT_ENTRIES = 200_000


def probe_setup(lengths: Path, hparams: str, device: torch.device) -> ProbeSetup:
    """The recipe's LJSpeech run (RUN and `hparams`) on the training split of `lengths`, probed on the GPU."""
    cfg = resolve_config(load_hparams(f"{RUN},{hparams}" if hparams else RUN))
    frames, texts = read_frames_and_texts(lengths)
    keep = train_split(frames.size, 0.8, 0)
    return ProbeSetup(
        cfg.train,
        cfg.model,
        cfg.batching,
        frames[keep],
        symbol_counts(texts, keep),
        device,
        CudaGauge(device),
        log=print,
    )


def snapshot(setup: ProbeSetup, b0: int, out: Path) -> None:
    """Whether B0 = b0 fits (training/auto_batch.fits: each probe shape's step, its graphs captured), the
    allocator's history over it written to `out`."""
    torch.cuda.memory._record_memory_history(stacks="python", max_entries=SNAPSHOT_ENTRIES)  # no C++ frames: smaller
    try:
        ok = fits(setup, b0)
        out.parent.mkdir(parents=True, exist_ok=True)
        torch.cuda.memory._dump_snapshot(str(out))
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    print(f"B0 {b0} {'fits' if ok else 'does not fit'}; memory snapshot in {out}")


def probe(setup: ProbeSetup) -> int:
    tick = time.perf_counter()
    b0 = probe_b0(setup)
    print(f"batch_size=auto: B0 = {b0}, probed in {time.perf_counter() - tick:.0f} s")
    return b0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.release.gpu_check.capacity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("what", choices=("snapshot", "probe"), help="B0's memory snapshot, or batch_size=auto's probe")
    parser.add_argument("--b0", type=int, default=128, help="snapshot: the B0 to try (default 128)")
    parser.add_argument("--out", type=Path, default=Path("memory.pickle"), help="snapshot: the file to write")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cuda:N")
    parser.add_argument("--lengths", type=Path, default=LJSPEECH_LENGTHS, help="TSV with frames and text columns")
    parser.add_argument("--hparams", default="", help="extra train.py hparams (e.g. matmul_precision=high)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type != "cuda" or not torch.cuda.is_available():
        print(f"error: --device {args.device}: needs a CUDA GPU (on the CPU batch_size=auto is 16)", file=sys.stderr)
        return 2
    try:
        setup = probe_setup(args.lengths, args.hparams, device)
    except (UserError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.what == "snapshot":
        snapshot(setup, args.b0, args.out)
    else:
        probe(setup)
    return 0


if __name__ == "__main__":
    sys.exit(main())
