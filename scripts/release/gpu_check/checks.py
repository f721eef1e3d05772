"""What every part of the GPU check shares: a check's verdict (Check), where and how big it runs
(Setup), a command run with its output logged, the report of a list of checks, and a demo training run
that must finish and learn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scripts.common import markdown_table

REPO = Path(__file__).resolve().parents[3]
TINY_MODEL = "model_preset=micro"  # hparams.yaml's model_presets
#: The demo's decoder loop at padded shapes replayed as CUDA graphs (the demo's r = 2 divides 16)
GRAPHED_DEMO = "graph_bucket=16,cuda_graphs=true"


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


def verdict(check: Check) -> str:
    return "skipped" if check.ok is None else "ok" if check.ok else "FAILED"


def write_report(setup: Setup, checks: list[Check], title: str = "GPU check") -> None:
    """OUT/report.json (every check whole) and OUT/report.md (the table of checks, then each check's
    tables under their headings)."""
    setup.out.mkdir(parents=True, exist_ok=True)
    (setup.out / "report.json").write_text(json.dumps([asdict(c) for c in checks], indent=1))
    rows = [[c.part, c.name, verdict(c), f"{c.seconds:.1f}", c.detail] for c in checks]
    lines = [
        f"# {title}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, device {setup.device}"
        f"{' (tiny sizes)' if setup.tiny else ''}",
        "",
        *markdown_table(["part", "check", "result", "seconds", "detail"], rows),
    ]
    for c in checks:
        for heading, table in c.figures.get("tables", {}).items():
            lines += ["", f"## {heading}", "", *table]
    (setup.out / "report.md").write_text("\n".join(lines) + "\n")


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
