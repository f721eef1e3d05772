"""The whole GPU measurement in one command: every check the first GPU session needs, one report.

    make gpu-check                                   # every part on CUDA (longer than one 10-minute call)
    make gpu-check ARGS="--parts env,tests,train"    # some parts: each fits in 10 minutes
    make gpu-check ARGS="--device cpu --tiny"        # every part at toy sizes on the CPU (the test suite runs it)

Parts, in order:
  env      torch, CUDA, the GPU and its memory, and measured ceilings: a large device-to-device copy
           (GB/s) and large bf16, TF32 and fp32 matrix products (TFLOP/s)
  tests    tests/test_cuda.py (the CUDA tests; they skip without CUDA)
  train    the demo on the device in fp32, bf16 and fp16 (losses fall, none is NaN); a run stopped
           mid-epoch and resumed; synthesis from its checkpoint; DDP in one process (force_ddp: NCCL
           on CUDA); two DDP ranks on the one device over gloo with the loop graphed (CUDA tensors on a GPU)
  bench    scripts/bench/step.py (eager, fast, bucketed, graphed, bf16, graphed+bf16) and
           scripts/bench/epoch.py on the paper's Table 3 strategies, eager and graphed, time-boxed
           (--max-batches timed batches per strategy spread over the epoch's cost)
  graphed  a short demo training run on the graphed decoder loop beside the same run eager: the
           per-epoch losses must track each other
  fill     scripts/bench/step.py at B0 16 (fp32), 32 and 64 (TF32), 64 (bf16) and 128 (TF32) on the
           recipe's default SSB: us per decoder step, real mel frames/s, peak memory and operations per
           step, graphed, and graphed with the attention recomputed or fused (FILL_CELLS; about 6 minutes)

Each check runs as its own process with a time limit, its output kept in OUT/logs/. The report,
OUT/report.md and OUT/report.json, is rewritten after every check (a part cut short by a time
limit keeps what it measured), and a short summary is printed last. Exit 0 when no check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from data.shared import LJSPEECH_LENGTHS  # torch-free
from scripts.common import OPS_HEADING, markdown_table, markdown_tables

REPO = Path(__file__).resolve().parents[2]
PARTS = ("env", "tests", "train", "bench", "graphed", "fill")
TINY_MODEL = "model_preset=micro"  # hparams.yaml's model_presets
TABLE3 = "RAND,SB-BR,SSB-BR,SSB-DBS-BR,SSB-DBS-BR-cost"  # and the recipe's default SSB (scripts/bench/epoch.py)
TABLE3_TINY = "RAND,SSB-DBS-BR-cost"  # --tiny: the reference and the recipe's default, a check of the path
#: The demo's decoder loop at padded shapes replayed as CUDA graphs (the demo's r = 2 divides 16)
GRAPHED_DEMO = "graph_bucket=16,cuda_graphs=true"
#: bench.step's variants that the bench part times (graphed+recompute is left to a run of its own: one more
#: capture of every shape would not fit the part's 10-minute call)
BENCH_STEP_VARIANTS = "eager,fast,bucketed,graphed,bf16,graphed+bf16"
#: The fill part's cells, (B0, precision): what decides issue 38's targets (B0 16 in fp32, 64 in TF32,
#: 128 fitting) and their neighbours; each is one scripts.bench.step run on the recipe's default SSB
FILL_CELLS = ((16, "fp32"), (32, "tf32"), (64, "tf32"), (64, "bf16"), (128, "tf32"))
#: The hparams of each precision: fp32 (the paper's), TF32 matrix products, bf16 autocast
PRECISIONS = {"fp32": "matmul_precision=highest", "tf32": "matmul_precision=high", "bf16": "amp=bf16"}


@dataclass
class Check:
    """One check's verdict: ok True/False, None when skipped (the reason in `detail`)."""

    part: str
    name: str
    ok: bool | None
    seconds: float
    detail: str
    figures: dict = field(default_factory=dict)
    log: str = ""


@dataclass(frozen=True)
class Setup:
    """Where and how big: the device, toy sizes or real ones, the output folder."""

    device: str
    tiny: bool
    out: Path
    timeout: int

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    def demo(self, name: str, extra: str = "") -> str:
        """train.py hparams for a demo run named `name` in OUT, sharing one corpus and mel cache."""
        size = (
            f"demo_utterances=24,batch_size=4,val_batch_size=4,epochs=1,learning_rate=0.003,warmup_steps=0,{TINY_MODEL}"
            if self.tiny
            else "epochs=4"
        )
        return (
            f"dataset=demo,{size},device={self.device},progress=false,num_workers=0,overwrite=true,"
            f"demo_dir={self.out / 'demo'},mel_cache_dir={self.out / 'mels'},output_dir={self.out / name}"
            + ("," + extra if extra else "")
        )


def run_logged(setup: Setup, name: str, cmd: list[str], timeout: int | None = None) -> tuple[int, str, float]:
    """Run a command from the repository root, its output to OUT/logs/NAME.log: (exit code, output,
    seconds); exit code 124 when it ran past its time limit."""
    logs = setup.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    tick = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout or setup.timeout)
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as err:
        code = 124
        output = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) else err.stdout or ""
        output += f"\n[stopped after {timeout or setup.timeout} s]"
    (logs / f"{name}.log").write_text(" ".join(cmd) + "\n\n" + output)
    return code, output, time.perf_counter() - tick


def train_cmd(setup: Setup, name: str, extra: str = "", resume: bool = False) -> list[str]:
    if resume:
        return [sys.executable, "train.py", "--resume", str(setup.out / name)] + (["--hparams", extra] if extra else [])
    return [sys.executable, "train.py", "--hparams", setup.demo(name, extra)]


def read_records(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def learns(records: list[dict], tiny: bool) -> tuple[bool, str, dict]:
    """Every epoch's training loss finite and, at real sizes, the last below the first (a toy run
    of one epoch checks the plumbing, not the learning)."""
    losses = [r.get("train_loss") for r in records]
    finite = bool(losses) and all(isinstance(v, float) and v == v and abs(v) != float("inf") for v in losses)
    falls = len(losses) > 1 and losses[-1] < losses[0]
    return (
        finite and (falls or tiny),
        f"train loss {' -> '.join(f'{v:.4f}' for v in losses) or 'none'}",
        {"train_loss": losses},
    )


def training_check(setup: Setup, part: str, name: str, extra: str = "") -> Check:
    """A demo run that must finish and learn."""
    code, output, seconds = run_logged(setup, name, train_cmd(setup, name, extra))
    records = read_records(setup.out / name)
    ok, detail, figures = learns(records, setup.tiny)
    figures["seconds_per_epoch"] = [r.get("train_seconds") for r in records]
    return Check(part, name, code == 0 and ok, seconds, f"exit {code}; {detail}", figures, tail(output))


def tail(text: str, chars: int = 1500) -> str:
    return text[-chars:]


def env_part(setup: Setup) -> list[Check]:
    """Versions and the measured ceilings, in this process."""
    import torch

    from scripts.bench.steps import device_name

    tick = time.perf_counter()
    device = torch.device(setup.device)
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "device": device_name(device),
    }
    if setup.cuda:
        info["memory_gib"] = round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
    size = 256 if setup.tiny else 8192
    info["copy_gb_per_s"] = copy_bandwidth(device, 2**22 if setup.tiny else 2**30)
    for label, dtype, precision in (
        ("bf16", torch.bfloat16, "highest"),
        ("tf32", torch.float32, "high"),
        ("fp32", torch.float32, "highest"),
    ):
        info[f"matmul_{label}_tflops"] = matmul_tflops(device, size, dtype, precision)
    detail = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in info.items())
    return [Check("env", "env", True, time.perf_counter() - tick, detail, info)]


def copy_bandwidth(device, nbytes: int, repeats: int = 10) -> float:
    """GB/s of a device-to-device copy of nbytes, counting the read and the write."""
    import torch

    from training.loop import synchronize

    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    synchronize(device)
    tick = time.perf_counter()
    for _ in range(repeats):
        dst.copy_(src)
    synchronize(device)
    return 2 * nbytes * repeats / (time.perf_counter() - tick) / 1e9


def matmul_tflops(device, n: int, dtype, precision: str, repeats: int = 10) -> float:
    """TFLOP/s of an n x n by n x n product at a float32 matmul precision (high: TF32 on CUDA)."""
    import torch

    from training.loop import synchronize

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        a @ b
        synchronize(device)
        tick = time.perf_counter()
        for _ in range(repeats):
            a @ b
        synchronize(device)
        return 2 * n**3 * repeats / (time.perf_counter() - tick) / 1e12
    finally:
        torch.set_float32_matmul_precision(before)


def tests_part(setup: Setup) -> list[Check]:
    # --noconftest: the suite's guards (hashing ../shared, recording the checkout) guard the suite,
    # not this one file, which writes only under its tmp folders
    code, output, seconds = run_logged(
        setup,
        "cuda-tests",
        [sys.executable, "-m", "pytest", "-q", "-rs", "--noconftest", "-p", "no:cacheprovider", "tests/test_cuda.py"],
    )
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", output)}
    if not setup.cuda:
        ok = None if code == 0 and not counts.get("failed") else False
        return [Check("tests", "cuda-tests", ok, seconds, f"no CUDA here: {counts}", counts, tail(output))]
    return [
        Check(
            "tests",
            "cuda-tests",
            code == 0 and counts.get("passed", 0) > 0,
            seconds,
            f"exit {code}: {counts}",
            counts,
            tail(output),
        )
    ]


def train_part(setup: Setup) -> list[Check]:
    checks = [training_check(setup, "train", "train-fp32")]
    for amp in ("bf16", "fp16"):
        if setup.cuda:
            checks.append(training_check(setup, "train", f"train-{amp}", f"amp={amp}"))
        else:
            checks.append(Check("train", f"train-{amp}", None, 0.0, f"amp={amp} needs CUDA"))
    checks += [resume_check(setup), synthesis_check(setup), ddp_one_check(setup), ddp_two_check(setup)]
    return checks


def resume_check(setup: Setup) -> Check:
    """Stopped after 3 steps (a checkpoint inside epoch 0), then resumed to the end."""
    name = "train-resume"
    code1, out1, s1 = run_logged(setup, name + "-stop", train_cmd(setup, name, "stop_after_steps=3"))
    code2, out2, s2 = run_logged(setup, name, train_cmd(setup, name, "stop_after_steps=0", resume=True))
    records = read_records(setup.out / name)
    ok, detail, figures = learns(records, setup.tiny)
    resumed = "resumed" in out2
    return Check(
        "train",
        name,
        code1 == 0 and code2 == 0 and resumed and ok,
        s1 + s2,
        f"exit {code1} then {code2}; {'resumed' if resumed else 'did not resume'}; {detail}",
        figures,
        tail(out2),
    )


def synthesis_check(setup: Setup) -> Check:
    checkpoint = setup.out / "train-fp32" / "checkpoint_best.pt"
    if not checkpoint.is_file():
        return Check("train", "synthesis", False, 0.0, f"{checkpoint} is missing (train-fp32 failed)")
    out = setup.out / "synth"
    code, output, seconds = run_logged(
        setup,
        "synthesis",
        [
            sys.executable,
            "-m",
            "scripts.tools.synthesize",
            "--checkpoint",
            str(checkpoint),
            "--text",
            "a short test sentence",
            "--out",
            str(out),
        ],
    )
    wavs = sorted(p.name for p in out.glob("*.wav")) if out.is_dir() else []
    return Check(
        "train", "synthesis", code == 0 and bool(wavs), seconds, f"exit {code}; wrote {wavs}", {}, tail(output)
    )


def ddp_one_check(setup: Setup) -> Check:
    """force_ddp=true: DDP over a process group of one (NCCL on CUDA)."""
    name = "ddp-one-process"
    code, output, seconds = run_logged(setup, name, train_cmd(setup, name, "force_ddp=true"))
    ok = code == 0 and "parameters identical on all 1 ranks" in output
    backend = "NCCL" if setup.cuda else "gloo"
    return Check("train", name, ok, seconds, f"exit {code}; DDP over {backend} at world size 1", {}, tail(output))


def ddp_two_check(setup: Setup) -> Check:
    """Two ranks on the one device over gloo (NCCL cannot put two ranks on one GPU), the decoder loop
    replayed as CUDA graphs (on the CPU: its static buffers, eagerly): DDP's gradient hooks must see
    the graphed backward's gradients, or the ranks' parameters part at the first step."""
    name = "ddp-two-ranks-graphed"
    device = "cuda:0" if setup.cuda else "cpu"
    hp = setup.demo(name, f"epochs=1,dist_backend=gloo,{GRAPHED_DEMO}").replace(
        f"device={setup.device}", f"device={device}"
    )
    code, output, seconds = run_logged(
        setup,
        name,
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "train.py",
            "--hparams",
            hp,
        ],
    )
    ok = code == 0 and "parameters identical on all 2 ranks" in output
    return Check(
        "train", name, ok, seconds, f"exit {code}; 2 ranks on {device} over gloo, graphed loop", {}, tail(output)
    )


def bench_part(setup: Setup) -> list[Check]:
    if not LJSPEECH_LENGTHS.is_file():
        return [
            Check(
                "bench",
                "bench",
                None,
                0.0,
                f"{LJSPEECH_LENGTHS} is absent (it ships in ../shared; SHARED_DIR names another folder)",
            )
        ]
    size = (
        ["--preset", "small", "--batches", "1", "--hparams", f"n_frames_per_step=4,{TINY_MODEL}"]
        if setup.tiny
        else ["--preset", "full", "--batches", "4"]
    )
    code, output, seconds = run_logged(
        setup,
        "bench-step",
        [
            sys.executable,
            "-m",
            "scripts.bench.step",
            "--device",
            setup.device,
            "--variants",
            BENCH_STEP_VARIANTS,
            *size,
        ],
    )
    tables = dict(zip(("bench-step", OPS_HEADING), markdown_tables(output)))
    ratio = re.search(r"fast/eager speed ratio: ([\d.]+)", output)
    checks = [
        Check(
            "bench",
            "bench-step",
            code == 0 and ratio is not None,
            seconds,
            f"exit {code}; fast/eager {ratio[1] if ratio else 'n/a'}",
            {"tables": tables},
            tail(output),
        )
    ]
    # sized on an H100 and an H200 (docs/results.md#on-a-gpu) so that the part fits one 10-minute call:
    # bench-step about 3 min (half of it capturing 2 x 11 shapes), eager epochs about 1.5 min, graphed
    # about 2 min (1.5 min of it capturing the timed batches' shapes, hence fewer timed batches)
    for label, timed, extra in (
        ("eager", 8, []),
        ("graphed", 5, ["--graph-bucket", "32" if setup.tiny else "64", "--cuda-graphs"]),
    ):
        checks.append(epoch_bench_check(setup, label, timed, extra))
    return checks


def epoch_bench_check(setup: Setup, label: str, timed: int, extra: list[str]) -> Check:
    """scripts.bench.epoch on Table 3's strategies, `timed` batches each (one for --tiny): the time
    reduction against RAND, and each strategy's seconds and frames per second."""
    name = f"bench-epoch-{label}"
    tiny_epoch = ["--subset", "96", "--warmup", "0", "--hparams", f"n_frames_per_step=4,{TINY_MODEL}"]
    size = [*tiny_epoch, "--max-batches", "1"] if setup.tiny else ["--max-batches", str(timed)]
    code, output, seconds = run_logged(
        setup,
        name,
        [
            sys.executable,
            "-m",
            "scripts.bench.epoch",
            "--device",
            setup.device,
            "--strategies",
            TABLE3_TINY if setup.tiny else TABLE3,
            "--json",
            *size,
            *extra,
        ],
    )
    try:  # the JSON comes first (stdout), the per-batch timings after it (stderr)
        result = json.JSONDecoder().raw_decode(output[output.index("{") :])[0]
    except ValueError:
        result = {}
    rows = {
        k: {f: v.get(f) for f in ("seconds_per_epoch", "reduction_pct", "paper_reduction_pct", "frames_per_second")}
        for k, v in result.get("strategies", {}).items()
    }
    reductions = ", ".join(f"{k} {v['reduction_pct']:.1f} %" for k, v in rows.items() if v["reduction_pct"] is not None)
    return Check(
        "bench",
        name,
        code == 0 and bool(rows),
        seconds,
        f"exit {code}; time reduction vs RAND: {reductions or 'n/a'}",
        {"strategies": rows, "capture_seconds": result.get("capture_seconds")},
        tail(output),
    )


def graphed_part(setup: Setup) -> list[Check]:
    """The same demo run with the decoder loop eager and graphed: per-epoch losses within 1e-3."""
    bucket = 16 if setup.tiny else 64
    runs = {}
    checks = []
    for label, graphs in (("eager", "false"), ("graphed", "true")):
        name = f"graphed-{label}"
        check = training_check(setup, "graphed", name, f"fast_decoder=true,graph_bucket={bucket},cuda_graphs={graphs}")
        runs[label] = check.figures.get("train_loss", [])
        checks.append(check)
    pairs = list(zip(runs["eager"], runs["graphed"]))
    worst = max((abs(a - b) / abs(a) for a, b in pairs if a and b), default=float("inf"))
    ok = bool(pairs) and len(runs["eager"]) == len(runs["graphed"]) and worst < 1e-3
    checks.append(
        Check(
            "graphed",
            "graphed-tracks-eager",
            ok,
            0.0,
            f"largest relative difference of the per-epoch training losses {worst:.2e}",
            {"eager": runs["eager"], "graphed": runs["graphed"]},
        )
    )
    return checks


def fill_part(setup: Setup) -> list[Check]:
    """scripts.bench.step at each of FILL_CELLS (--tiny: B0 4 in fp32, and TF32, which needs CUDA)."""
    cells = ((4, "fp32"), (4, "tf32")) if setup.tiny else FILL_CELLS
    return [fill_check(setup, b0, precision) for b0, precision in cells]


def fill_check(setup: Setup, b0: int, precision: str) -> Check:
    """One cell: graphed, and graphed with the attention recomputed or fused (CUDA only), at B0 = b0 in
    `precision`, two timed batches of the recipe's default SSB, only their shapes captured. A cell that
    runs out of memory fails with the bench's own words in its log."""
    name = f"fill-b0-{b0}-{precision}"
    if precision != "fp32" and not setup.cuda:
        return Check("fill", name, None, 0.0, f"{precision} needs CUDA")
    if not LJSPEECH_LENGTHS.is_file():
        return Check("fill", name, None, 0.0, f"{LJSPEECH_LENGTHS} is absent (it ships in ../shared)")
    size = (
        [
            "--preset",
            "small",
            "--batches",
            "1",
            "--hparams",
            f"n_frames_per_step=4,{TINY_MODEL},{PRECISIONS[precision]}",
        ]
        if setup.tiny
        else ["--preset", "full", "--batches", "2", "--hparams", PRECISIONS[precision]]
    )
    code, output, seconds = run_logged(
        setup,
        name,
        [
            sys.executable,
            "-m",
            "scripts.bench.step",
            "--device",
            setup.device,
            "--strategy",
            "SSB-DBS-BR-cost",
            "--batch-size",
            str(b0),
            "--capture",
            "timed",
            "--variants",
            "graphed,graphed+recompute,graphed+fused",
            *size,
        ],
    )
    tables = markdown_tables(output)
    figures = {
        "tables": dict(zip((f"fill: B0 {b0}, {precision}", f"fill: B0 {b0}, {precision}, {OPS_HEADING}"), tables))
    }
    rows = {row.split("|")[1].strip(): row.split("|")[2:5] for row in (tables[0][2:] if tables else [])}
    detail = "; ".join(
        f"{v} {cells[0].strip()} us/step, {cells[1].strip()} frames/s, {cells[2].strip()}"
        for v, cells in rows.items()
        if v.startswith("graphed")
    )
    return Check(
        "fill",
        name,
        code == 0 and len(tables) == 2,
        seconds,
        f"exit {code}; {detail or 'no table'}",
        figures,
        tail(output),
    )


PART_RUNNERS: dict[str, Callable[[Setup], list[Check]]] = {
    "env": env_part,
    "tests": tests_part,
    "train": train_part,
    "bench": bench_part,
    "graphed": graphed_part,
    "fill": fill_part,
}


def verdict(check: Check) -> str:
    return "skipped" if check.ok is None else "ok" if check.ok else "FAILED"


def write_report(setup: Setup, checks: list[Check]) -> None:
    setup.out.mkdir(parents=True, exist_ok=True)
    (setup.out / "report.json").write_text(json.dumps([asdict(c) for c in checks], indent=1))
    rows = [[c.part, c.name, verdict(c), f"{c.seconds:.1f}", c.detail] for c in checks]
    lines = [
        f"# GPU check, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, device {setup.device}"
        f"{' (tiny sizes)' if setup.tiny else ''}",
        "",
        *markdown_table(["part", "check", "result", "seconds", "detail"], rows),
    ]
    for c in checks:
        for heading, table in c.figures.get("tables", {}).items():
            lines += ["", f"## {heading}", "", *table]
    (setup.out / "report.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--tiny", action="store_true", help="toy sizes: every part in about a minute on a CPU")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)} (default all)"
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "runs" / "gpu-check", help="report folder (default runs/gpu-check)"
    )
    parser.add_argument("--timeout", type=int, default=540, help="seconds one check may run (default 540)")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        print(f"error: --parts: unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}", file=sys.stderr)
        return 2
    if args.device.startswith("cuda") and not cuda_available():
        print(
            f"error: --device {args.device}: this PyTorch sees no CUDA GPU; use --device cpu --tiny to try the "
            "script on the CPU",
            file=sys.stderr,
        )
        return 2
    setup = Setup(args.device, args.tiny, args.out.resolve(), args.timeout)
    checks: list[Check] = []
    for part in parts:
        for check in PART_RUNNERS[part](setup):
            checks.append(check)
            write_report(setup, checks)
            print(f"{part:8s} {check.name:22s} {verdict(check):8s} {check.seconds:7.1f}s  {check.detail}", flush=True)
    failed = [c.name for c in checks if c.ok is False]
    print(
        f"gpu-check: {sum(c.ok is True for c in checks)} ok, {len(failed)} failed, "
        f"{sum(c.ok is None for c in checks)} skipped; report in {setup.out / 'report.md'}"
    )
    return 1 if failed else 0


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    sys.exit(main())
