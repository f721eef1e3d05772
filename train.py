"""Train Tacotron2 with length-aware batching (Ge et al., Interspeech 2021).

    python train.py                                        # the embedded demo corpus, CPU-sized
    python train.py --hparams batching=ssb,dbs=true,br=true,dataset=ljspeech
    python train.py --resume runs/demo                     # continue the last checkpoint
    torchrun --nproc_per_node=4 train.py --hparams dataset=ljspeech

Read top to bottom: set-up, then one epoch = plan -> train -> (validate) -> log -> checkpoint.
All settings and their defaults are in hparams.yaml.
"""
from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm import tqdm

from batching import BatchingConfig, batch_stats, plan_global
from batching.sampler import PlanBatchSampler
from data.collate import TextMelCollate
from data.text import N_SYMBOLS
from model import Tacotron2, Tacotron2Config, Tacotron2Loss
from model.plotting import alignment_diagonality, plot_alignment, plot_gate, plot_mel
from training import distributed as dist_utils
from training.checkpoint import BEST, LAST, atomic_torch_save, load_checkpoint, rng_state, set_rng_state
from training.datasets import build_datasets
from training.hparams import HParamsError, batching_fields, load_hparams, model_fields
from training.run_logger import RunLogger, write_metrics

RESUME_MAY_CHANGE = {"epochs", "device", "num_workers", "threads", "progress", "checkpoint_every_steps",
                     "stop_after_steps", "validate_every", "max_bad_steps"}
VAL_SEED = 1234  # validation draws its prenet-dropout masks from this seed, for comparable losses


class StopRequested(Exception):
    """Raised between steps after SIGINT/SIGTERM, once a checkpoint has been written."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hparams", default="", help="comma-separated key=value overrides of hparams.yaml")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    return parser.parse_args(argv)


def resolve_hparams(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Fresh run: hparams.yaml + overrides. Resume: the run's own hparams + the few allowed changes."""
    if not args.resume:
        return load_hparams(args.hparams), None
    run_dir = Path(args.resume)
    ckpt = load_checkpoint(run_dir / LAST)
    hp = dict(ckpt["hparams"])
    changes = load_hparams(args.hparams) if args.hparams else {}
    for key in (k.split("=", 1)[0].strip() for k in args.hparams.split(",") if k.strip()):
        if key not in RESUME_MAY_CHANGE:
            raise HParamsError(f"--resume: '{key}' cannot change in a resumed run "
                               f"(allowed: {', '.join(sorted(RESUME_MAY_CHANGE))})")
        hp[key] = changes[key]
    hp["output_dir"] = str(run_dir)
    return hp, ckpt


def pick_device(name: str, local_rank: int) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        name = f"cuda:{local_rank}"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device={name} asked for, but this PyTorch sees no CUDA GPU; use device=cpu")
    return torch.device(name)


def epoch_plan_stats(frames: np.ndarray, config: BatchingConfig, epoch: int, world_size: int) -> dict[str, float]:
    """ZPR/ABL/number of batches of the whole epoch, all ranks together (the paper's Table 1 figures)."""
    plan = plan_global(frames, config, epoch, world_size)
    if config.batching == "bload":  # blocks: ZPR over block frames; every step runs whole blocks (no straggler)
        from batching.bload import block_stats
        stats = block_stats(frames, plan, config.n_frames_per_step)
        return {k: stats[k] for k in ("n_batches", "zpr", "abl", "n_blocks", "decoder_steps")}
    per_rank = [plan.batches(rank) for rank in range(world_size)]
    stats = batch_stats(frames, [b for batches in per_rank for b in batches])
    record = {"n_batches": int(stats["n_batches"]), "zpr": float(stats["zpr"]), "abl": float(stats["abl"])}
    if world_size > 1:
        # Straggler cost: in each step every rank waits for the longest batch of that step.
        step_lengths = np.array([[frames[b].max() for b in batches] for batches in per_rank], dtype=np.float64)
        record["straggler_frames"] = float((step_lengths.max(0) - step_lengths.mean(0)).sum())
        record["straggler_fraction"] = record["straggler_frames"] / float(step_lengths.max(0).sum())
    return record


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        hp, ckpt = resolve_hparams(args)
    except (HParamsError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if ckpt is None and (Path(hp["output_dir"]) / LAST).exists() and not hp["overwrite"]:
        print(f"error: {hp['output_dir']} already holds a run. Continue it with --resume {hp['output_dir']}, "
              "or start over with --hparams overwrite=true (or another output_dir)", file=sys.stderr)
        return 2

    # ------------------------------------------------------------------ set-up
    wants_cuda = hp["device"].startswith("cuda") or (hp["device"] == "auto" and torch.cuda.is_available())
    device_kind = "cuda" if wants_cuda else "cpu"
    if hp["threads"]:
        torch.set_num_threads(hp["threads"])
    info = dist_utils.init_distributed(device_kind)
    device = pick_device(hp["device"], info.local_rank)
    run_dir = Path(hp["output_dir"])
    if info.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "hparams.json").write_text(json.dumps(hp, indent=2) + "\n")
    log = print if info.is_main else (lambda *a, **k: None)

    with dist_utils.main_rank_first(info):
        train_set, val_set = build_datasets(hp, progress=hp["progress"] and info.is_main)
    collate = TextMelCollate(hp["n_frames_per_step"])
    train_cfg = BatchingConfig(**batching_fields(hp))
    val_cfg = BatchingConfig(batching="rand", batch_size=hp["val_batch_size"], seed=hp["seed"])
    val_sampler = PlanBatchSampler(val_set.frames, val_cfg, info.rank, info.world_size)
    loader_args = dict(collate_fn=collate, num_workers=hp["num_workers"], pin_memory=device.type == "cuda",
                       generator=torch.Generator(), persistent_workers=False)
    if train_cfg.batching == "bload":  # BLoad: batches of packed blocks (data/packed.py); validation stays unpacked
        from data.packed import BlockBatchSampler, PackedCollate, PackedView
        train_sampler = BlockBatchSampler(train_set.frames, train_cfg, info.rank, info.world_size)
        train_loader = DataLoader(PackedView(train_set), batch_sampler=train_sampler, **{
            **loader_args, "collate_fn": PackedCollate(hp["n_frames_per_step"], train_sampler.block_length)})
    else:
        train_sampler = PlanBatchSampler(train_set.frames, train_cfg, info.rank, info.world_size)
        train_loader = DataLoader(train_set, batch_sampler=train_sampler, **loader_args)
    val_loader = DataLoader(val_set, batch_sampler=val_sampler, **loader_args)

    torch.manual_seed(hp["seed"])
    model_cfg = Tacotron2Config(**model_fields(hp, N_SYMBOLS))
    model = Tacotron2(model_cfg).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=hp["learning_rate"], weight_decay=hp["weight_decay"])
    criterion = Tacotron2Loss(hp["n_frames_per_step"], loss_norm=hp["loss_norm"],
                              guided_attention=hp["guided_attention"],
                              guided_attention_sigma=hp["guided_attention_sigma"],
                              gate_pos_weight=hp["gate_pos_weight"])
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(hp["amp"])
    if amp_dtype is not None and device.type != "cuda":
        raise RuntimeError(f"amp={hp['amp']} needs a CUDA device; this run is on {device}")
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)

    state = {"epoch": 0, "step_in_epoch": 0, "global_step": 0, "records": [], "best_val": math.inf,
             "partial": None}
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scaler.load_state_dict(ckpt["scaler"])
        state.update(ckpt["progress"])
        log(f"resumed {run_dir} at epoch {state['epoch']}, step {state['step_in_epoch']} of that epoch")
    if info.enabled:
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    core = model.module if info.enabled else model
    logger = RunLogger(run_dir, info.is_main, purge_step=state["global_step"] if ckpt else None)
    n_params = sum(p.numel() for p in core.parameters())
    log(f"{len(train_set)} train / {len(val_set)} val utterances | {n_params / 1e6:.2f}M parameters | "
        f"{device} x{info.world_size} | batching={hp['batching']} dbs={train_cfg.dbs} br={hp['br']} | {run_dir}")

    def save(path_name: str, sampler_state: dict[str, Any] | None = None) -> None:
        """Everything needed to continue exactly here; the sampler state only inside an epoch.
        Called on every rank (each rank's random state is gathered); rank 0 writes."""
        rngs = dist_utils.gather_objects(rng_state(), info)
        if info.is_main:
            atomic_torch_save({"model": core.state_dict(), "optimizer": optimizer.state_dict(),
                               "scaler": scaler.state_dict(), "hparams": hp, "progress": dict(state),
                               "sampler": sampler_state, "rng": rngs, "world_size": info.world_size},
                              run_dir / path_name)

    stop_signal = {"hit": False}

    def on_signal(signum, frame):  # noqa: ARG001 - signal handler signature
        if stop_signal["hit"]:
            raise KeyboardInterrupt
        stop_signal["hit"] = True
        log("\nstop requested: finishing this step, then writing a checkpoint (press again to abort)")

    previous_handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    # ------------------------------------------------------------------ one epoch
    def train_epoch(epoch: int) -> dict[str, float]:
        resuming = state["step_in_epoch"] > 0
        train_sampler.set_epoch(epoch)
        dist_utils.check_same_plan(train_sampler.plan_digest(), epoch, info)
        consumed_offset = 0  # steps of this epoch taken before the sampler's own count starts
        if resuming:
            train_sampler.load_state_dict(ckpt["sampler"])
            consumed_offset = state["step_in_epoch"] - train_sampler.state_dict()["consumed"]
            set_rng_state(ckpt["rng"][info.rank % len(ckpt["rng"])])
        else:  # the paper's seed + 1 per epoch (rank 0); other ranks draw other dropout masks
            torch.manual_seed(hp["seed"] + epoch + 100_003 * info.rank)
        acc = state["partial"] or {"loss_valid": 0.0, "loss_padded": 0.0, "guided": 0.0, "steps": 0, "bad": 0,
                                   "seconds": 0.0, "frames": 0.0}
        model.train()
        n_total = len(train_sampler) + state["step_in_epoch"] if resuming else len(train_sampler)
        bar = tqdm(train_loader, total=n_total, initial=state["step_in_epoch"], desc=f"epoch {epoch}",
                   disable=None if hp["progress"] and info.is_main else True,  # None: off when not a terminal
                   leave=False, dynamic_ncols=True)
        tick = time.perf_counter()
        for batch in bar:
            batch = batch.to(device)
            packing = getattr(batch, "packing", None)  # BLoad blocks: where each utterance sits
            with torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else nullcontext():
                out = model(batch.text, batch.text_lengths, batch.mel, batch.mel_lengths, packing)
                terms = criterion(out, batch.mel, batch.gate, batch.mel_lengths, batch.text_lengths, packing)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(terms.loss).backward()
            scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), hp["grad_clip"])
            finite = torch.isfinite(terms.loss.detach()) & torch.isfinite(grad_norm)
            all_finite = dist_utils.all_sum([float(not finite)], info, device)[0] == 0
            if all_finite:
                scaler.step(optimizer)
                acc["bad"] = 0
            else:
                optimizer.zero_grad(set_to_none=True)
                acc["bad"] += 1
                state["bad_total"] = state.get("bad_total", 0) + 1
                log(f"\nwarning: non-finite loss or gradient at epoch {epoch} step {state['step_in_epoch']}: "
                    f"step skipped ({acc['bad']} in a row)")
                if acc["bad"] >= hp["max_bad_steps"]:
                    raise FloatingPointError(
                        f"{acc['bad']} non-finite steps in a row at epoch {epoch}; stopping. The last good "
                        f"checkpoint is {run_dir / LAST}. Try a lower learning_rate or amp=off.")
            scaler.update()
            if all_finite:
                acc["loss_valid"] += float(terms.valid.total)
                acc["loss_padded"] += float(terms.padded.total)
                acc["guided"] += float(terms.guided_attention)
                acc["steps"] += 1
            acc["frames"] += float(batch.mel_lengths.sum())
            state["step_in_epoch"] += 1
            state["global_step"] += 1
            if device.type == "cuda":
                torch.cuda.synchronize()
            acc["seconds"] += time.perf_counter() - tick
            bar.set_postfix(loss=f"{float(terms.loss.detach()):.4f}")
            if state["global_step"] % 10 == 0:
                logger.scalars({"loss_valid": float(terms.valid.total), "loss_padded": float(terms.padded.total),
                                "grad_norm": float(grad_norm)}, state["global_step"], "step")
            stop_now = stop_signal["hit"] or (hp["stop_after_steps"] and state["global_step"] >= hp["stop_after_steps"])
            every = hp["checkpoint_every_steps"]
            if stop_now or (every and state["global_step"] % every == 0):
                state["partial"] = acc
                save(LAST, train_sampler.state_dict(consumed=state["step_in_epoch"] - consumed_offset))
                if stop_now:
                    raise StopRequested
            tick = time.perf_counter()
        bar.close()
        sums = dist_utils.all_sum([acc["loss_valid"], acc["loss_padded"], acc["guided"], acc["steps"], acc["frames"]],
                                  info, device)
        steps = max(sums[3], 1)
        return {"train_loss_valid": sums[0] / steps, "train_loss_padded": sums[1] / steps,
                "train_guided_attention": sums[2] / steps,
                "train_seconds": acc["seconds"], "steps": int(acc["steps"] + acc["bad"]),
                "train_frames_per_second": sums[4] / max(acc["seconds"], 1e-9)}

    @torch.no_grad()
    def validate(epoch: int) -> dict[str, float]:
        """Teacher-forced validation over RAND batches; sums over ranks so every rank agrees."""
        model.eval()
        val_sampler.set_epoch(0)  # the same validation batches every time
        sums = np.zeros(5)
        first = None
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(VAL_SEED)
            for batch in val_loader:
                batch = batch.to(device)
                out = core(batch.text, batch.text_lengths, batch.mel, batch.mel_lengths)
                terms = criterion(out, batch.mel, batch.gate, batch.mel_lengths, batch.text_lengths)
                frames = float(batch.mel_lengths.sum())
                sums += [float(terms.valid.total) * frames, frames, float(terms.padded.total), 1.0, 0.0]
                for i in range(len(batch.mel_lengths)):
                    dec_len = int(math.ceil(int(batch.mel_lengths[i]) / hp["n_frames_per_step"]))
                    align = out.alignments[i, :dec_len, : int(batch.text_lengths[i])].float().cpu().numpy()
                    sums[4] += alignment_diagonality(align, int(batch.text_lengths[i]), dec_len)
                first = first or (batch, out)
        total = dist_utils.all_sum(list(sums), info, device)
        n_utts = len(val_set)
        if first is not None and info.is_main:
            batch, out = first
            dec_len = int(math.ceil(int(batch.mel_lengths[0]) / hp["n_frames_per_step"]))
            length = int(batch.mel_lengths[0])
            logger.figure("val/alignment", plot_alignment(
                out.alignments[0, :dec_len, : int(batch.text_lengths[0])].float().cpu().numpy(),
                f"epoch {epoch}"), epoch, "alignment.png")
            logger.figure("val/mel", plot_mel(batch.mel[0, :, :length].cpu().numpy(),
                                              out.mel_postnet[0, :, :length].float().cpu().numpy()), epoch, "mel.png")
            logger.figure("val/gate", plot_gate(batch.gate[0, :length].cpu().numpy(),
                                                torch.sigmoid(out.gate[0, :length]).float().cpu().numpy()), epoch)
        model.train()
        return {"val_loss_valid": total[0] / max(total[1], 1), "val_loss_padded": total[2] / max(total[3], 1),
                "val_diagonality": total[4] / max(n_utts, 1)}

    # ------------------------------------------------------------------ the loop
    exit_code = 0
    try:
        for epoch in range(state["epoch"], hp["epochs"]):
            plan = epoch_plan_stats(train_set.frames, train_cfg, epoch, info.world_size)
            record = {"epoch": epoch, **plan, **train_epoch(epoch)}
            record["steps_per_rank"] = dist_utils.gather_objects(record["steps"], info)
            if (epoch + 1) % hp["validate_every"] == 0 or epoch + 1 == hp["epochs"]:
                record.update(validate(epoch))
            record["train_loss"] = record["train_loss_" + hp["loss_norm"]]
            if "val_loss_valid" in record:
                record["val_loss"] = record["val_loss_" + hp["loss_norm"]]
            state.update(epoch=epoch + 1, step_in_epoch=0, partial=None, records=state["records"] + [record])
            logger.scalars({k: v for k, v in record.items() if k != "epoch"}, epoch, "epoch")
            line = (f"epoch {epoch:4d} | {record['train_seconds']:7.1f}s | {record['n_batches']} batches | "
                    f"ZPR {record['zpr']:5.2f}% ABL {record['abl']:6.1f} | train {record['train_loss']:.4f}")
            if "val_loss" in record:
                line += f" | val {record['val_loss_valid']:.4f} (padded {record['val_loss_padded']:.4f}) " \
                        f"| diagonal {record['val_diagonality']:.2f}"
            log(line)
            improved = record.get("val_loss_valid", math.inf) < state["best_val"]
            state["best_val"] = min(state["best_val"], record.get("val_loss_valid", math.inf))
            save(LAST)
            if improved:
                save(BEST)
            if info.is_main:
                write_metrics(run_dir, state["records"])
        if info.enabled:
            digest = dist_utils.check_same_parameters(core, info)
            log(f"parameters identical on all {info.world_size} ranks (sha1 {digest[:12]})")
    except StopRequested:
        log(f"stopped at epoch {state['epoch']} step {state['step_in_epoch']}; "
            f"continue with: python train.py --resume {run_dir}")
        exit_code = 0 if hp["stop_after_steps"] else 130
    finally:
        logger.close()
        dist_utils.shutdown()
        for sig, handler in previous_handlers.items():
            signal.signal(sig, handler)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
