"""Shape-faithful epoch-time benchmark of the batching strategies (the paper's Table 3).

Training time depends on tensor shapes, not on what the audio says. This takes real utterance
lengths (mel frames, and text lengths from the text column), plans an epoch with each strategy,
builds random text ids and random mels of exactly those lengths, and times training steps
(forward, loss, backward, gradient clipping, Adam step) with Tacotron2.

    python -m scripts.bench.epoch --threads 1              # CPU: small model, 1,024 utterances
    python -m scripts.bench.epoch --device cuda            # GPU: full model, all 10,480 clips

With --graph-bucket G (the fast decoder, model/shapes.py) every batch's decoder loop runs at its
padded shape from the strategy's own epoch-0 table; --cuda-graphs also captures the shapes of the
timed batches as CUDA graphs (model/graphs.py) before timing, and reports the capture time.

Beside the paper's experiments it times the recipe's default batching, `SSB-DBS-BR-cost` (SSB on
the cost key, its width calibrated to the paper's SSB's ZPR on these lengths, with DBS and BR).

With --max-batches K it times K batches of each plan (spread evenly over the plan's batch
sizes), fits time = a + b * decoder_steps + c * batch_size * decoder_steps over all timed
batches, and predicts every batch of the epoch from that fit; the output says so. Strategies
are timed in alternation (a rotating order every round) so that drift (thermals, other
processes) hits them all alike; the ratios are the result, absolute times are the machine's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.optimize import nnls

from batching import BatchingConfig, batch_stats, plan_epoch, train_split
from batching.analysis import calibrate, resolve_width
from batching.errors import UserError
from data.shared import LJSPEECH_LENGTHS
from model.graphs import build_loop_graphs
from model.shapes import round_up, shape_table
from scripts.bench.steps import BENCH_STRATEGIES, Bench, device_name, pick_timed, read_frames_and_texts, symbol_counts
from scripts.common import markdown_table
from scripts.reproduction.paper import EXPERIMENTS, PAPER_TABLE3
from training.config import RunConfig, resolve_config
from training.hparams import load_hparams

DEFAULT_STRATEGIES = "RAND,SB-BR,SSB-BR,BKT-BR,ATS-BR,SSB-DBS-BR,SSB-DBS-BR-cost"


def fit_times(features: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Non-negative least squares of seconds on [1, steps, batch * steps]; with fewer timed
    batches than terms, time proportional to batch * steps alone."""
    if len(seconds) < features.shape[1]:
        return np.array([0.0, 0.0, seconds.sum() / features[:, 2].sum()])
    return nnls(features, seconds)[0]


def subset_parameters(frames: np.ndarray, ssb: BatchingConfig) -> dict[str, int]:
    """BKT's bucket size and ATS's bins re-chosen for a subset the way the paper chose them for
    LJSpeech (Table 1): the ZPR closest to, not above, SSB's. 1024 and 58 fit 10,480 clips only."""
    best = calibrate(frames, ssb, batch_stats(frames, plan_epoch(frames, ssb))["zpr"])
    return {k: v for found in best.values() for k, v in found.items() if k in ("bucket_size", "n_bins") and v}


def make_plans(
    frames: np.ndarray,
    text_lengths: np.ndarray,
    names: list[str],
    common: dict,
    r: int,
    max_batches: int,
    graph_bucket: int = 0,
) -> dict[str, dict]:
    """Each strategy's epoch-0 batches, their shapes and padding stats, which ones to time, and
    with graph_bucket its decoder loop shape table."""
    plans = {}
    for name in names:
        config, _ = resolve_width(frames, BatchingConfig.from_dict({**BENCH_STRATEGIES[name], **common}))
        batches = plan_epoch(frames, config, epoch=0)
        steps = np.array([math.ceil(frames[b].max() / r) for b in batches])
        sizes = np.array([len(b) for b in batches])
        plans[name] = dict(
            batches=batches,
            steps=steps,
            sizes=sizes,
            stats=batch_stats(frames, batches),
            features=np.stack([np.ones(len(batches)), steps, sizes * steps], 1),
            timed=pick_timed(sizes * steps, max_batches),
            seconds=[],
            graphs=None,
            table=shape_table(batches, frames, text_lengths, graph_bucket) if graph_bucket else None,
        )
    return plans


def capture_plans(bench: Bench, plans: dict[str, dict], frames: np.ndarray, text_lengths: np.ndarray) -> float:
    """Each plan's graphs, for the shapes of its timed batches; the seconds it took."""
    tick = time.perf_counter()
    r = bench.cfg.model.n_frames_per_step
    for p in plans.values():
        table = p["table"]
        shapes = {
            table.shape_of(len(b), round_up(int(frames[b].max()), r), int(text_lengths[b].max()))
            for b in (p["batches"][i] for i in p["timed"])
        }
        p["graphs"] = build_loop_graphs(bench.parts.core.decoder, sorted(shapes), bench.device, bench.parts.amp_dtype)
    bench.sync()
    return time.perf_counter() - tick


def time_plans(bench: Bench, plans: dict[str, dict], frames: np.ndarray, text_lengths: np.ndarray, warmup: int) -> None:
    """Fill each plan's `seconds`: round k times every plan's k-th chosen batch, in a rotating order."""
    names = list(plans)
    biggest = max(((p, i) for p in plans.values() for i in p["timed"]), key=lambda pi: pi[0]["features"][pi[1], 2])
    for w in range(warmup):  # the largest shape first: allocator and kernels settle before timing
        b = biggest[0]["batches"][biggest[1]]
        bench.step(bench.batch(frames[b], text_lengths[b], seed=w), biggest[0]["table"], biggest[0]["graphs"])
    rounds = max(len(p["timed"]) for p in plans.values())
    for k in range(rounds):
        for name in names[k % len(names) :] + names[: k % len(names)]:
            p = plans[name]
            if k < len(p["timed"]):
                b = p["batches"][p["timed"][k]]
                batch = bench.batch(frames[b], text_lengths[b], seed=1000 + k)
                p["seconds"].append(bench.step(batch, p["table"], p["graphs"]))
                print(
                    f"round {k + 1}/{rounds} {name}: batch of {len(b)} x {p['steps'][p['timed'][k]]} steps "
                    f"{p['seconds'][-1]:.3f}s",
                    file=sys.stderr,
                )


def strategy_rows(plans: dict[str, dict], coef: np.ndarray | None) -> dict[str, dict]:
    """Each strategy's epoch: its plan's figures and seconds, measured (coef None: every batch was
    timed) or from the fit over the timed batches; its time reduction against RAND's and the paper's."""
    rows = {}
    for name, p in plans.items():
        seconds = float(p["features"].sum(0) @ coef) if coef is not None else float(sum(p["seconds"]))
        rows[name] = dict(
            n_batches=len(p["batches"]),
            timed_batches=len(p["timed"]),
            zpr=p["stats"]["zpr"],
            abl=p["stats"]["abl"],
            decoder_steps=int(p["steps"].sum()),
            seconds_per_epoch=seconds,
            frames_per_second=p["stats"]["real_frames"] / seconds,
            measured_seconds=float(sum(p["seconds"])),
        )
    base = rows.get("RAND", {}).get("seconds_per_epoch")
    for name, row in rows.items():
        row["reduction_pct"] = None if base is None else 100 * (base - row["seconds_per_epoch"]) / base
        row["paper_reduction_pct"] = PAPER_TABLE3.get(name, (None, None))[1]
    return rows


def training_utterances(count: int, split: float, seed: int, subset: int) -> np.ndarray:
    """The indices of the training split's utterances, a seeded random `subset` of them if not 0."""
    keep = train_split(count, split, seed)
    if subset:
        keep = np.sort(np.random.default_rng(seed).choice(keep, min(subset, keep.size), replace=False))
    return keep


def bench_config(args: argparse.Namespace, preset: str) -> RunConfig:
    """The LJSpeech recipe's config at the model preset, with --amp, --seed and --hparams; without
    --graph-bucket the plain decoder loop, the paper's (not the ljspeech preset's padded one)."""
    graphed = (
        f"fast_decoder=true,graph_bucket={args.graph_bucket},"
        if args.graph_bucket
        else "fast_decoder=false,graph_bucket=0,"
    )
    return resolve_config(
        load_hparams(
            f"dataset=ljspeech,loss_norm=padded,model_preset={preset},amp={args.amp},"
            f"seed={args.seed},{graphed}{args.hparams}"
        )
    )


def run(args: argparse.Namespace, frames: np.ndarray, texts: list[str]) -> dict:
    device = torch.device(args.device if args.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu")
    on_cpu = device.type == "cpu"
    preset = args.preset or ("small" if on_cpu else "full")
    subset = args.subset if args.subset is not None else (1024 if on_cpu else 0)
    max_batches = args.max_batches if args.max_batches is not None else (3 if on_cpu else 32)
    cfg = bench_config(args, preset)
    if args.threads:
        torch.set_num_threads(args.threads)
    if on_cpu:
        torch.set_flush_denormal(True)  # denormals from random targets would slow the CPU, not the GPU
    keep = training_utterances(frames.size, args.split, args.seed, subset)
    frames, symbols = frames[keep], symbol_counts(texts, keep)
    r = cfg.model.n_frames_per_step
    names = [n.strip() for n in args.strategies.split(",") if n.strip()]
    common = {"batch_size": cfg.batching.batch_size, "seed": args.seed}
    if subset:
        common |= subset_parameters(frames, BatchingConfig.from_dict({**EXPERIMENTS["SSB-BR"], **common}))
    plans = make_plans(frames, symbols, names, common, r, max_batches, args.graph_bucket)
    bench = Bench(cfg, device)
    capture_seconds = capture_plans(bench, plans, frames, symbols) if args.cuda_graphs else None
    time_plans(bench, plans, frames, symbols, args.warmup)

    extrapolated = any(len(p["timed"]) < len(p["batches"]) for p in plans.values())
    coef = (
        fit_times(
            np.concatenate([p["features"][p["timed"]] for p in plans.values()]),
            np.concatenate([p["seconds"] for p in plans.values()]),
        )
        if extrapolated
        else None
    )
    rows = strategy_rows(plans, coef)
    return dict(
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        device=device_name(device),
        device_type=device.type,
        torch=torch.__version__,
        lengths=str(args.lengths),
        utterances=int(frames.size),
        split=args.split,
        subset=subset,
        preset=preset,
        n_frames_per_step=r,
        batch_size=cfg.batching.batch_size,
        amp=cfg.train.amp,
        warmup=args.warmup,
        max_batches=max_batches,
        extrapolated=extrapolated,
        graph_bucket=args.graph_bucket,
        cuda_graphs=bool(args.cuda_graphs),
        capture_seconds=capture_seconds,
        bucket_size=common.get("bucket_size", int(EXPERIMENTS["BKT-BR"]["bucket_size"])),
        n_bins=common.get("n_bins", int(EXPERIMENTS["ATS-BR"]["n_bins"])),
        fit=None
        if coef is None
        else dict(zip(("seconds_per_batch", "seconds_per_step", "seconds_per_sample_step"), map(float, coef))),
        strategies=rows,
    )


def decoder_loop(result: dict) -> str:
    """How the decoder loop ran, for the table's caption."""
    if not result.get("graph_bucket"):
        return "decoder loop eager"
    if not result.get("cuda_graphs"):
        return f"decoder loop padded to graph_bucket={result['graph_bucket']} shapes"
    how = "CUDA graphs" if result["device_type"] == "cuda" else "static buffers, eager"
    return (
        f"decoder loop as {how} of graph_bucket={result['graph_bucket']} shapes "
        f"(captured in {result['capture_seconds']:.1f} s)"
    )


def markdown(result: dict) -> str:
    lines = [
        f"Shape-faithful epoch time, {result['date']}: {result['device']}, torch {result['torch']}",
        f"({result['utterances']} utterances of {Path(result['lengths']).name}"
        f"{', a random subset' if result['subset'] else ''}; model preset {result['preset']}, "
        f"r = {result['n_frames_per_step']}, B0 = {result['batch_size']}, amp {result['amp']}; "
        f"{decoder_loop(result)}; "
        f"BKT bucket size {result['bucket_size']}, ATS {result['n_bins']} bins"
        f"{', re-calibrated to SSB-BR ZPR on the subset' if result['subset'] else ''})",
        "",
    ]
    if result["extrapolated"]:
        fit = result["fit"]
        lines += [
            f"Extrapolated: {result['max_batches']} timed batch(es) per strategy, every batch of the epoch "
            f"predicted by time = {fit['seconds_per_batch']:.4g} s + {fit['seconds_per_step']:.4g} s x steps "
            f"+ {fit['seconds_per_sample_step']:.4g} s x batch size x steps (fit on all timed batches).",
            "",
        ]
    rows = [
        [
            name,
            str(row["n_batches"]),
            f"{row['zpr']:.2f}",
            f"{row['abl']:.1f}",
            str(row["decoder_steps"]),
            f"{row['seconds_per_epoch']:.1f}",
            f"{row['frames_per_second']:.0f}",
            "" if row["reduction_pct"] is None else f"{row['reduction_pct']:.2f}",
            "" if row["paper_reduction_pct"] is None else f"{row['paper_reduction_pct']:.2f}",
        ]
        for name, row in result["strategies"].items()
    ]
    lines += markdown_table(
        [
            "Batching",
            "batches",
            "ZPR %",
            "ABL",
            "decoder steps/epoch",
            "s/epoch",
            "mel frames/s",
            "time reduction vs RAND %",
            "paper (Table 3) %",
        ],
        rows,
    )
    return "\n".join(lines) + "\n"


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--lengths",
        type=Path,
        default=LJSPEECH_LENGTHS,
        help="TSV with frames and text columns, or a filelist (default: LJSpeech's lengths.tsv)",
    )
    parser.add_argument("--split", type=float, default=0.8, help="the paper's seeded training split (default 0.8)")
    parser.add_argument(
        "--subset", type=int, help="time a random subset of N utterances (default: 1024 on CPU, all on GPU)"
    )
    parser.add_argument(
        "--strategies", default=DEFAULT_STRATEGIES, help=f"experiment names (default {DEFAULT_STRATEGIES})"
    )
    parser.add_argument("--preset", choices=("small", "full"), help="model preset (default: small on CPU, full on GPU)")
    parser.add_argument(
        "--hparams", default="", help="extra train.py hparams, e.g. n_frames_per_step=2,model.attention_dim=64"
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument(
        "--amp", choices=("off", "bf16", "fp16"), default="off", help="autocast (CUDA only; the paper: off)"
    )
    parser.add_argument(
        "--graph-bucket",
        type=int,
        default=0,
        help="pad the fast decoder loop to shapes of this many frames (model/shapes.py; default 0: off)",
    )
    parser.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="with --graph-bucket: replay the decoder loop as CUDA graphs (on the CPU: the same static buffers, eager)",
    )
    parser.add_argument(
        "--max-batches",
        type=int,
        help="timed batches per strategy, 0 = the whole epoch (default: 3 on CPU, 32 on GPU); fewer are extrapolated",
    )
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps on the largest batch first (default 1)")
    parser.add_argument(
        "--threads",
        type=int,
        help="CPU threads for torch (default: torch's); 1 is often "
        "fastest on a shared machine, where threads wait on each other",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the split, the subset, the plans and the model")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    parser.add_argument("--out", type=Path, help="also write the Markdown table to this file")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser()
    args = parser.parse_args(argv)
    unknown = [n for n in args.strategies.split(",") if n.strip() and n.strip() not in BENCH_STRATEGIES]
    if unknown:
        parser.error(f"unknown strategies {unknown}; known: {', '.join(BENCH_STRATEGIES)}")
    try:
        result = run(args, *read_frames_and_texts(args.lengths))
    except UserError as err:  # a user's mistake: one line (programming errors keep their tracebacks)
        print(f"error: {err}", file=sys.stderr)
        return 2
    text = markdown(result)
    if args.out:
        args.out.write_text(text)
    print(json.dumps(result, indent=2) if args.json else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
