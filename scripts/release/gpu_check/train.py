"""The train part: the demo in fp32, bf16 and fp16, a run stopped mid-epoch and resumed, synthesis
from its checkpoint, DDP in one process, and two DDP ranks on the one device."""

from __future__ import annotations

import sys

from .checks import GRAPHED_DEMO, Check, Setup, learns, read_records, run_logged, tail, train_cmd, training_check


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
