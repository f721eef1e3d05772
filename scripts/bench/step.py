"""The training step, variant against variant, in one run: real LJSpeech shapes, the same weights.

Takes the paper's training split of `lengths.tsv` (mel frames and text lengths), plans an epoch with
a strategy (default SSB-DBS-BR), picks K batches spread evenly over the plan's costs, and runs them
through the one training step (training/step.py: forward, loss, backward, clipping, Adam) with
random text ids and mels of exactly those lengths. Variants:

* eager: the plain decoder loop (model/decoder.py), today's reference;
* fast: the decoder loop with deferred recurrent weight gradients (model/fast_decoder.py);
* bucketed: fast, with the loop run at the graph-ready padded shape (graph_bucket=64, the
  table from the whole epoch's plan; model/shapes.py);
* graphed: bucketed, each shape's loop on static buffers captured as a CUDA graph (model/graphs.py;
  on the CPU the same buffers run eagerly: a check of the path, not a speed);
* bf16, graphed+bf16: fast and graphed under bf16 autocast (CUDA only);
* graphed+recompute: graphed, recomputing the attention's energy chain in the backward
  (model.recompute_attention: less activation memory, one more chain per step; CUDA only);
* graphed+fused: graphed, each step's attention and LSTM cells as Triton kernels, one forward and
  one backward each (model.fused_attention and model.fused_lstm; CUDA only);
* graphed+split: graphed+fused's attention, each LSTM cell's product on cuBLAS and its pointwise part
  as one Triton kernel each way (model.split_lstm: the fused cell's rival; CUDA only).

Every variant starts from the same initial weights. Numerics first: each variant's loss and
gradient on the first batch against eager's, and the ATen operations that batch's forward and
backward dispatch (training/op_count.py: compute operations only, views and allocations left out;
the whole forward with the loss, and the whole backward), per decoder step of the batch: an eager
step on a GPU launches about one kernel per operation, so this is its host cost, and it can be
counted on the CPU. (On the CPU the encoder's BiLSTM counts as the per-time-step operations it
decomposes into, one cuDNN call on a GPU.) Then timing: K rounds, each running one batch through
every variant in a rotating order, so drift and other processes hit all variants alike. Prints a
Markdown table (microseconds per decoder step, real mel frames per second, peak memory on CUDA,
first loss, relative gradient difference, speed against eager), then under its own caption
("ops per decoder step", which gpu_check's report uses as a heading) a second one of the
operations per decoder step, and last the line `fast/eager speed ratio: X.XX`. With --kernel-times DIR,
one more step of each variant that --variants names runs under torch.profiler after the timed rounds,
and a table per variant follows: each kernel's device time and calls per decoder step (on the CPU each
operation's), also written to DIR as JSON (scripts/bench/kernel_times.py).

    python -m scripts.bench.step                        # CPU: small model, eager and fast, 1 thread, 4 batches
    python -m scripts.bench.step --preset full --batches 2   # CPU, full model: about a minute a batch per variant
    python -m scripts.bench.step --device cuda --batches 16
    python -m scripts.bench.step --device cuda --variants graphed,graphed+recompute,graphed+fused
    python -m scripts.bench.step --device cuda --batch-size 64 --capture timed --hparams matmul_precision=high
    python -m scripts.bench.step --device cuda --variants graphed,graphed+fused --kernel-times runs/kernels
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch

from batching import BatchingConfig, plan_epoch, train_split
from batching.analysis import resolve_width
from batching.errors import UserError
from data.shared import LJSPEECH_LENGTHS
from model.shapes import ShapeTable, round_up, shape_table
from scripts.bench.kernel_times import kernel_report, per_decoder_step, precision_name, profiled
from scripts.bench.kernel_times import markdown as kernel_markdown
from scripts.bench.kernel_times import write_report as write_kernel_report
from scripts.bench.steps import (
    BENCH_STRATEGIES,
    Bench,
    cpu_threads_without_denormals,
    device_name,
    pick_timed,
    read_frames_and_texts,
    release_memory,
    symbol_counts,
)
from scripts.common import OPS_HEADING, markdown_table
from training.config import RunConfig, resolve_config
from training.hparams import load_hparams
from training.op_count import count_ops
from training.step import forward_loss, loop_shape, train_step, with_graphs

GRAPH_BUCKET = 64
GRAPHED = f"fast_decoder=true,graph_bucket={GRAPH_BUCKET},cuda_graphs=true"
VARIANTS = {
    "eager": "fast_decoder=false,graph_bucket=0",
    "fast": "fast_decoder=true,graph_bucket=0",
    "bucketed": f"fast_decoder=true,graph_bucket={GRAPH_BUCKET},cuda_graphs=false",
    "graphed": GRAPHED,
    "bf16": "fast_decoder=true,graph_bucket=0,amp=bf16",
    "graphed+bf16": f"{GRAPHED},amp=bf16",
    "graphed+recompute": f"{GRAPHED},model.recompute_attention=true",
    "graphed+fused": f"{GRAPHED},model.fused_attention=true,model.fused_lstm=true",
    "graphed+split": f"{GRAPHED},model.fused_attention=true,model.split_lstm=true",
}
CUDA_ONLY = ("bf16", "graphed+bf16", "graphed+recompute", "graphed+fused", "graphed+split")
#: What runs without --variants and --preset. On the CPU: eager and fast on the small model, a few
#: minutes in about 4 GiB. The graph-ready variants there only check the path (their static buffers
#: for every shape of the epoch cost GiBs at the full model's size); ask for them with --variants.
DEFAULTS = {"cpu": ("eager,fast", "small"), "cuda": (",".join(VARIANTS), "full")}


def variant_config(args: argparse.Namespace, variant: str) -> RunConfig:
    return resolve_config(
        load_hparams(
            f"dataset=ljspeech,loss_norm=padded,model_preset={args.preset},seed=0,{VARIANTS[variant]},{args.hparams}"
        )
    )


def chosen_batches(args: argparse.Namespace, r: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], dict]:
    """(frames, text lengths, K batches of the strategy's epoch-0 plan at B0 = --batch-size spread over
    their cost, and the plan's shape table, or with --capture timed the part of it the K batches use)."""
    frames, texts = read_frames_and_texts(args.lengths)
    keep = train_split(frames.size, 0.8, 0)
    frames, symbols = frames[keep], symbol_counts(texts, keep)
    config = BatchingConfig.from_dict({**BENCH_STRATEGIES[args.strategy], "seed": 0, "batch_size": args.batch_size})
    batches = plan_epoch(frames, resolve_width(frames, config)[0])
    costs = np.array([len(b) * -(-int(frames[b].max()) // r) for b in batches])
    timed = [batches[i] for i in pick_timed(costs, args.batches)]
    table = shape_table(batches, frames, symbols, GRAPH_BUCKET)
    if args.capture == "timed":  # only the timed batches' shapes (the same shapes: their buckets' rows and text)
        buckets = {round_up(int(frames[b].max()), GRAPH_BUCKET) for b in timed}
        table = ShapeTable(GRAPH_BUCKET, {f: table.rows[f] for f in buckets}, {f: table.text[f] for f in buckets})
    return frames, symbols, timed, table


def gradient(bench: Bench, batch, shape) -> dict:
    """The first batch's loss, flattened gradient (no optimiser step) and compute operations per
    decoder step of its forward and backward, with the same dropout masks for every variant."""
    bench.parts.optimizer.zero_grad(set_to_none=True)
    torch.manual_seed(1234)
    terms, forward = count_ops(forward_loss, bench.parts, batch, shape)
    _, backward = count_ops(terms.loss.backward)
    grads = [p.grad.flatten() for p in bench.parts.core.parameters() if p.grad is not None]
    steps = batch.mel.size(2) // bench.cfg.model.n_frames_per_step
    return {
        "loss": terms.loss.item(),
        "grad": torch.cat(grads).double(),
        "ops_forward": forward.compute / steps,
        "ops_backward": backward.compute / steps,
    }


def timed_step(bench: Bench, batch, shape) -> tuple[float, float]:
    """Seconds of one step, and its peak memory in GiB on CUDA (0 on the CPU)."""
    bench.sync()
    if bench.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(bench.device)
    start = time.perf_counter()
    train_step(bench.parts, batch, shape=shape)
    bench.sync()
    seconds = time.perf_counter() - start
    return seconds, torch.cuda.max_memory_allocated(bench.device) / 2**30 if bench.device.type == "cuda" else 0.0


def measure(
    args: argparse.Namespace, variants: list[str], device: torch.device
) -> tuple[dict[str, dict], Callable[[], dict[str, dict]]]:
    """Each variant's timings and first-batch figures, and what profiles the variants afterwards
    (kernel_reports on the same benches and batches)."""
    benches = {v: Bench(variant_config(args, v), device) for v in variants}
    r = benches[variants[0]].cfg.model.n_frames_per_step
    frames, text_lengths, batches, table = chosen_batches(args, r)
    for v, bench in benches.items():  # the graphed variants capture every shape of the epoch's table
        tick = time.perf_counter()
        bench.parts = with_graphs(
            bench.parts, bench.cfg.train.cuda_graphs, table if bench.cfg.train.graph_bucket else None, device
        )
        if bench.parts.graphs is not None:
            print(
                f"{v}: {len(table.shapes())} shapes {'captured' if bench.parts.graphs.captured else 'built'} "
                f"in {time.perf_counter() - tick:.1f} s",
                file=sys.stderr,
            )
    inputs = [benches[variants[0]].batch(frames[b], text_lengths[b], seed=k) for k, b in enumerate(batches)]
    shapes = {
        v: [loop_shape(table if benches[v].cfg.train.graph_bucket else None, batch) for batch in inputs]
        for v in variants
    }
    rows = {v: {"seconds": [], "steps": 0, "frames": 0} for v in variants}
    reference = None
    for v in variants:
        first = gradient(benches[v], inputs[0], shapes[v][0])
        reference = reference if reference is not None else first["grad"]
        rows[v].update(grad_diff=float((first.pop("grad") - reference).norm() / reference.norm()), **first)
        release_memory()
    train_step(benches[variants[0]].parts, inputs[0])  # warm-up of the allocator and kernels
    for k, batch in enumerate(inputs):
        for v in variants[k % len(variants) :] + variants[: k % len(variants)]:
            seconds, peak = timed_step(benches[v], batch, shapes[v][k])
            release_memory()
            rows[v]["seconds"].append(seconds)
            rows[v]["peak_gb"] = max(rows[v].get("peak_gb", 0.0), peak)
            rows[v]["steps"] += batch.mel.size(2) // r
            rows[v]["frames"] += int(batch.mel_lengths.sum())
            print(
                f"batch {k + 1}/{len(inputs)} {v}: {len(batch.mel_lengths)} x {batch.mel.size(2)} frames "
                f"{rows[v]['seconds'][-1]:.3f} s",
                file=sys.stderr,
            )
    return rows, partial(kernel_reports, args, benches, inputs, shapes, device)


def kernel_reports(
    args: argparse.Namespace, benches: dict[str, Bench], inputs: list, shapes: dict[str, list], device: torch.device
) -> dict[str, dict]:
    """The kernels per decoder step (scripts/bench/kernel_times.py) of each variant --variants names (eager
    and fast, which always run, only when named): one more step of the middle timed batch under the
    profiler, after the timed rounds, so that the profiler's own cost and its synchronisation stay out
    of the timings."""
    k = len(inputs) // 2
    batch = inputs[k]
    named = args.variants.split(",")
    reports = {}
    for v, bench in ((v, bench) for v, bench in benches.items() if v in named):
        records = profiled(partial(train_step, bench.parts, batch, shape=shapes[v][k]), device)
        release_memory()
        if not records:
            print(
                f"warning: {v}: the profiler recorded no {'kernel' if device.type == 'cuda' else 'operation'}",
                file=sys.stderr,
            )
        steps = batch.mel.size(2) // bench.cfg.model.n_frames_per_step
        precision = precision_name(bench.cfg.train.amp, bench.cfg.train.matmul_precision)
        kernels = per_decoder_step(records, steps)
        reports[v] = kernel_report(device_name(device), args.batch_size, precision, v, kernels)
    return reports


def kernel_section(reports: dict[str, dict], folder: Path, cuda: bool) -> str:
    """Each variant's kernel table, its JSON written into `folder` (the path printed under the table)."""
    lines = []
    for report in reports.values():
        lines += ["", *kernel_markdown(report, cuda), "", f"written to {write_kernel_report(folder, report)}"]
    return "\n".join(lines)


def markdown(rows: dict[str, dict], args: argparse.Namespace, device: torch.device) -> str:
    """The timing table, then under its own heading the operations per decoder step, then the ratios."""
    eager = sum(rows["eager"]["seconds"])
    timing = []
    for v, row in rows.items():
        seconds = sum(row["seconds"])
        peak = f"{row['peak_gb']:.1f} GB" if device.type == "cuda" else "n/a (CPU)"
        timing.append(
            [
                v,
                f"{1e6 * seconds / row['steps']:.0f}",
                f"{row['frames'] / seconds:.0f}",
                peak,
                f"{row['loss']:.6f}",
                f"{row['grad_diff']:.1e}",
                f"{eager / seconds:.2f}x",
            ]
        )
    ops = [
        [
            v,
            f"{row['ops_forward']:.1f}",
            f"{row['ops_backward']:.1f}",
            f"{row['ops_forward'] + row['ops_backward']:.1f}",
        ]
        for v, row in rows.items()
    ]
    spread = [e / f for e, f in zip(rows["eager"]["seconds"], rows["fast"]["seconds"])]
    return "\n".join(
        [
            f"Training step, {args.strategy} batches of the LJSpeech training split, model preset {args.preset}, "
            f"{device_name(device)}, torch {torch.__version__}",
            "",
            *markdown_table(
                [
                    "variant",
                    "us / decoder step",
                    "real mel frames/s",
                    "peak memory",
                    "first loss",
                    "grad diff vs eager",
                    "speed vs eager",
                ],
                timing,
            ),
            "",
            f"{OPS_HEADING}: ATen compute operations, the first batch (about one kernel launch each on a GPU)",
            "",
            *markdown_table(["variant", "forward", "backward", "total"], ops),
            "",
            f"per-batch fast/eager ratios: min {min(spread):.2f}, median {statistics.median(spread):.2f}, "
            f"max {max(spread):.2f}",
            f"fast/eager speed ratio: {eager / sum(rows['fast']['seconds']):.2f}",
        ]
    )


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=Path, default=LJSPEECH_LENGTHS, help="TSV with frames and text columns")
    parser.add_argument(
        "--strategy", default="SSB-DBS-BR", choices=list(BENCH_STRATEGIES), help="whose plan to draw from"
    )
    parser.add_argument("--batch-size", type=int, default=16, help="B0 of the plan (default 16, the paper's)")
    parser.add_argument(
        "--capture",
        choices=("all", "timed"),
        default="all",
        help="the graphed variants capture every shape of the epoch's table (all, as a run does) or only the "
        "timed batches' (timed: a shorter start)",
    )
    parser.add_argument("--batches", type=int, default=4, help="batches timed per variant (default 4)")
    parser.add_argument(
        "--preset", choices=("small", "full"), help="model preset (default: full on CUDA, small on the CPU)"
    )
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for torch (default 1)")
    parser.add_argument("--hparams", default="", help="extra train.py hparams for every variant")
    parser.add_argument(
        "--variants",
        help="comma-separated variants to run (default: all on CUDA, eager and fast on the CPU; eager and fast "
        "always run, the reference and the ratio; the CUDA-only ones are left out on the CPU)",
    )
    parser.add_argument(
        "--kernel-times",
        type=Path,
        metavar="DIR",
        help="after the timed rounds, one step of each variant that --variants names (by default eager and fast "
        "on the CPU) under torch.profiler: its kernels' device time (on the CPU its operations' time) and calls "
        "per decoder step, printed and written to DIR/kernels-b0-B0-PRECISION-VARIANT.json",
    )
    return parser


def chosen_variants(args: argparse.Namespace, device: torch.device) -> list[str]:
    """The variants to run, in VARIANTS' order, with the device's defaults for --variants and --preset
    filled into args; a UserError names an unknown variant."""
    default_variants, default_preset = DEFAULTS["cuda" if device.type == "cuda" else "cpu"]
    args.variants, args.preset = args.variants or default_variants, args.preset or default_preset
    asked = {"eager", "fast", *args.variants.split(",")}
    if asked - VARIANTS.keys():
        raise UserError(
            f"--variants {args.variants}: unknown {sorted(asked - VARIANTS.keys())}; choose from {', '.join(VARIANTS)}"
        )
    return [v for v in VARIANTS if v in asked and (device.type == "cuda" or v not in CUDA_ONLY)]


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    with cpu_threads_without_denormals(args.threads):
        return run(args, torch.device(args.device))


def run(args: argparse.Namespace, device: torch.device) -> int:
    try:
        variants = chosen_variants(args, device)
        print(
            f"bench.step: {', '.join(variants)} on {device} ({args.threads} thread{'s' * (args.threads > 1)}), "
            f"model preset {args.preset}, {args.batches} batches of {args.strategy} at B0 {args.batch_size}; "
            f"left out: {', '.join(v for v in VARIANTS if v not in variants) or 'none'}",
            file=sys.stderr,
        )
        rows, profile = measure(args, variants, device)
    except (UserError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(markdown(rows, args, device), flush=True)  # the timings first: a profiler that fails loses only its tables
    if args.kernel_times:
        print(kernel_section(profile(), args.kernel_times, device.type == "cuda"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
