"""Does batch_size=auto's learning-rate rule keep quality at equal GPU time? A CPU study on the demo corpus.

batch_size=auto (training/auto_batch.py) trains at the largest B0 the GPU holds and scales the rate
given for the paper's B0 = 16 by (B0 / 16) ** k, k from lr_batch_scaling (none 0, sqrt 0.5, linear
1). A larger B0 takes fewer, larger steps; on a GPU an epoch then costs less time (the step's fixed
cost per decoder step is paid once for more utterances). The question is whether, for the same
GPU time, the larger batch at the scaled rate reaches the validation loss of B0 = 16.

For each rule and seed it trains the demo preset (SSB-DBS-BR, the recipe's default batching, the
paper's constant rate 0.001, no warm-up, validation every epoch) at B0 = 16 for --epochs epochs and
at B0 = 32, the rate scaled as batch_size=auto would, for twice as many. Each epoch is priced at the
GPU step-cost fit measured on an H100 (fp32, graphed, B0 = 16; docs/results.md):

    seconds = 0.2856 ms x decoder steps + 7.06 us x utterance-steps (utterances x their decoder steps)

from the plan's own figures in metrics.jsonl (decoder_steps, and padded_frames / r). B0 = 32's
validation loss is read at the last epoch whose cumulative price is within B0 = 16's whole run.
Prints a Markdown table per rule (mean and spread over the seeds) and the per-run rows. Runs two
trainings at a time (one per core); a finished run (its metrics hold every epoch) is not run again.

    python -m scripts.reproduction.auto_lr                       # 3 seeds, none and linear, 6 epochs
    python -m scripts.reproduction.auto_lr --seeds 0 --epochs 2 --rules linear
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scripts.common import markdown_table
from training.batch_probe import PAPER_B0
from training.config import LR_BATCH_SCALINGS

REPO = Path(__file__).resolve().parents[2]
#: The step-cost fit (docs/results.md, "Epoch time"): seconds per decoder step and per utterance-step.
PER_STEP, PER_UTTERANCE_STEP = 0.2856e-3, 7.06e-6
BASE = "dataset=demo,batching=ssb,dbs=true,br=true,learning_rate=0.001,warmup_steps=0,validate_every=1,progress=false"


def priced_seconds(record: dict, r: int) -> float:
    """An epoch's GPU time at the step-cost fit, from its plan figures."""
    return PER_STEP * record["decoder_steps"] + PER_UTTERANCE_STEP * record["padded_frames"] / r


def at_equal_time(records: list[dict], budget: float, r: int) -> tuple[int, float, float] | None:
    """(epochs, their cumulative price, validation loss) of the last validated epoch whose cumulative
    price is within `budget` (None if even the first is over it)."""
    total, found = 0.0, None
    for record in records:
        total += priced_seconds(record, r)
        if total > budget:
            break
        if "val_loss" in record:
            found = (record["epoch"] + 1, total, record["val_loss"])
    return found


def read_metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def train(run_dir: Path, hparams: str, epochs: int) -> None:
    """One train.py run unless its metrics already hold every epoch; its log beside it."""
    if len(read_metrics(run_dir)) >= epochs:
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "train.py",
        "--hparams",
        f"{hparams},epochs={epochs},output_dir={run_dir},overwrite=true",
    ]
    with open(run_dir.parent / f"{run_dir.name}.log", "w") as log:
        subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, check=True)


def run_name(rule: str, b0: int, seed: int) -> str:
    return f"{rule}-b{b0}-seed{seed}"


def runs(args: argparse.Namespace) -> list[tuple[str, int, int, Path, str, int]]:
    """(rule, seed, B0, run dir, hparams, epochs) of every run."""
    found = []
    for rule in args.rules.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            for b0, epochs in ((16, args.epochs), (32, 2 * args.epochs)):
                rate = 0.001 * (b0 / PAPER_B0) ** LR_BATCH_SCALINGS[rule]  # training/config.with_batch_size's rule
                hp = f"{BASE},seed={seed},batch_size={b0},learning_rate={rate:g},lr_batch_scaling={rule},{args.hparams}"
                found.append((rule, seed, b0, args.out / run_name(rule, b0, seed), hp.rstrip(","), epochs))
    return found


def report(plan: list, r: int) -> list[str]:
    """The per-rule summary and the per-run rows, as Markdown lines."""
    rows, summary = [], {}
    for rule, seed, b0, run_dir, _, epochs in plan:
        if b0 != 16:
            continue
        base = read_metrics(run_dir)
        budget = sum(priced_seconds(rec, r) for rec in base)
        big = at_equal_time(read_metrics(run_dir.with_name(run_name(rule, 32, seed))), budget, r)
        if big is None:
            continue
        row = [
            rule,
            str(seed),
            f"{base[-1]['val_loss']:.4f}",
            f"{budget:.1f}",
            f"{big[2]:.4f}",
            str(big[0]),
            f"{big[1]:.1f}",
        ]
        rows.append(row)
        summary.setdefault(rule, []).append(big[2] - base[-1]["val_loss"])
    lines = markdown_table(
        ["rule", "seed", "B0 16 val loss", "B0 16 GPU s", "B0 32 val loss", "B0 32 epochs", "B0 32 GPU s"], rows
    )
    mean = [
        [rule, str(len(d)), f"{statistics.mean(d):+.4f}", f"{min(d):+.4f} .. {max(d):+.4f}"]
        for rule, d in summary.items()
    ]
    return ["", *markdown_table(["rule", "seeds", "B0 32 minus B0 16, mean", "range"], mean), "", *lines]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rules", default="none,linear", help="lr_batch_scaling rules to try")
    parser.add_argument("--epochs", type=int, default=6, help="epochs at B0 = 16 (B0 = 32 gets twice as many)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "auto-lr")
    parser.add_argument("--jobs", type=int, default=2, help="trainings at a time")
    parser.add_argument("--hparams", default="", help="more train.py hparams for every run")
    args = parser.parse_args(argv)
    plan = runs(args)
    # The demo corpus and its mels are made once, before runs share them.
    check = [sys.executable, "train.py", "--check", "--hparams", plan[0][4]]
    subprocess.run(check, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda run: train(run[3], run[4], run[5]), plan))
    r = json.loads((plan[0][3] / "hparams.json").read_text()).get("n_frames_per_step", 2)
    print("\n".join(report(plan, r)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
