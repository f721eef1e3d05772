"""One epoch of training, validation, and the checkpoint that lets a run continue exactly.

Module-level functions over a `Run` (training/run.py) and the mutable `RunState`
(training/checkpoint.py). Per-epoch sums are dataclasses with named fields, summed over ranks
in one all-reduce each; adding a metric is adding a field.

A kill at any instant loses at most the work since the last checkpoint: every file of the run
directory is written atomically, BEST before LAST, and metrics.jsonl (after LAST) is rewritten
from LAST's records when the run starts again, so it never lacks or repeats an epoch.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from model import Batch, Tacotron2Output
from model.plotting import alignment_diagonality, plot_alignment, plot_gate, plot_mel
from model.shapes import ceil_div
from training import distributed as dist_utils
from training.checkpoint import (
    EpochPosition,
    RunState,
    atomic_torch_save,
    remove_stale_temporaries,
    rng_state,
    set_rng_state,
)
from training.device_sums import DEVICE_FIELDS, DeviceSums, EpochSums
from training.run import Run
from training.rundir import BEST, LAST, write_hparams, write_metrics
from training.step import learning_rate, loop_shape, train_step

VAL_SEED = 1234  # validation draws its prenet-dropout masks from this seed, for comparable losses


class StopRequested(Exception):
    """Raised between steps after SIGINT/SIGTERM (or stop_after_steps), once a checkpoint is written."""


class TrainingDiverged(FloatingPointError):
    """Too many non-finite steps (max_bad_steps in a row, or every step of an epoch); the last good
    checkpoint is kept and the message names it."""


@dataclass
class ValSums:
    """Validation sums on one rank."""

    loss_valid_frames: float = 0.0  # `valid` loss x real frames, per batch
    frames: float = 0.0
    loss_padded: float = 0.0  # `padded` loss, per batch
    batches: int = 0
    diagonality: float = 0.0  # per utterance


def step_vote(run: Run, global_step: int) -> dist_utils.StepVote:
    """Whether to stop and whether the checkpoint clock ran out. A single process decides after
    every step from host state alone; under DDP the ranks agree in one small all-reduce every
    log_every steps (the only collective of the loop besides DDP's own)."""
    if not run.info.enabled:
        return dist_utils.StepVote(stop=run.stop.hit, checkpoint=run.clock.due())
    if global_step % run.train.log_every:
        return dist_utils.StepVote()
    return dist_utils.agree(run.stop.hit, run.clock.due(), run.info, run.device)


def prepare_run_dir(run: Run, state: RunState, fresh: bool) -> None:
    """Rank 0, before training: remove what a killed process left half-written, record the
    hparams, and rewrite metrics.jsonl from the checkpoint's records (a kill between writing LAST
    and metrics.jsonl left it an epoch short). A run started from its beginning (`fresh`) also
    removes an earlier run's checkpoints (overwrite=true), so that a kill before its own first
    checkpoint cannot leave `--resume` continuing the old run."""
    if not run.info.is_main:
        return
    remove_stale_temporaries(run.run_dir)
    write_hparams(run.run_dir, run.hp)
    if fresh:
        for name in (LAST, BEST):
            (run.run_dir / name).unlink(missing_ok=True)
    write_metrics(run.run_dir, state.records)


def save_checkpoint(
    run: Run, state: RunState, names: tuple[str, ...] = (LAST,), sampler_state: dict | None = None
) -> None:
    """Everything needed to continue exactly here, written to each of `names` in turn; the sampler
    state only inside an epoch. Called on every rank (each rank's random state is gathered);
    rank 0 writes, after flushing TensorBoard so that a kill loses nothing logged before."""
    dist_utils.average_buffers(run.parts.core, run.info)
    rngs = dist_utils.gather_objects(rng_state(), run.info)
    if run.info.is_main:
        parts = run.parts
        payload = {
            "model": parts.core.state_dict(),
            "optimizer": parts.optimizer.state_dict(),
            "scaler": parts.scaler.state_dict(),
            "hparams": run.hp,
            "progress": state.to_dict(),
            "sampler": sampler_state,
            "rng": rngs,
            "world_size": run.info.world_size,
        }
        run.logger.flush()
        for name in names:
            atomic_torch_save(payload, run.run_dir / name)
    run.clock.reset()


def start_epoch(run: Run, state: RunState, epoch: int, position: EpochPosition | None) -> tuple[EpochSums, int]:
    """Plan the epoch (or restore the mid-epoch position a resume starts from) and seed dropout;
    returns the running sums and how many of the epoch's steps ran before the sampler's own count
    starts."""
    sampler = run.loaders.train_sampler
    sampler.set_epoch(epoch)
    if state.step_in_epoch > 0:  # resuming inside this epoch
        sampler.load_state_dict(position.sampler)
        set_rng_state(position.rngs[run.info.rank % len(position.rngs)])
        offset = state.step_in_epoch - sampler.state_dict()["consumed"]
    else:  # the paper's seed + 1 per epoch (rank 0); other ranks draw other dropout masks
        torch.manual_seed(run.train.seed + epoch + 100_003 * run.info.rank)
        offset = 0
    dist_utils.check_same_plan(sampler.plan_digest(), epoch, run.info)
    return EpochSums.from_dict(state.partial), offset


def check_bad_steps(run: Run, epoch: int, step: int, bad_in_row: float) -> None:
    """Stop after max_bad_steps non-finite steps in a row (read one step late, see device_sums)."""
    if bad_in_row >= run.train.max_bad_steps:
        raise TrainingDiverged(
            f"{int(bad_in_row)} non-finite steps in a row at epoch {epoch} (by step {step}); stopping. "
            f"{last_good(run)}. Try a lower learning_rate or amp=off."
        )


def last_good(run: Run) -> str:
    last = run.run_dir / LAST
    return f"The last good checkpoint is {last}" if last.is_file() else "No checkpoint was written yet"


def log_step(run: Run, state: RunState, values: dict[str, float], bar: tqdm) -> None:
    """Every log_every steps: the progress bar's loss and skipped-step count and TensorBoard's step
    scalars, from the device sums just read."""
    run.logger.scalars(
        {"loss": values["last_loss"], "grad_norm": values["last_grad_norm"], "skipped_steps": values["skipped"]},
        state.global_step,
        "step",
    )
    bar.set_postfix(loss=f"{values['last_loss']:.4f}", skipped=int(values["skipped"]))


def read_into(sums: EpochSums, dev: DeviceSums) -> dict[str, float]:
    """Copy the device sums into the host's EpochSums now (waits for the device)."""
    dev.start_copy()
    values = dev.read()
    for name in DEVICE_FIELDS:
        kind = type(getattr(sums, name))
        setattr(sums, name, kind(values[name]))
    return values


def checkpoint_due(run: Run, state: RunState, vote: dist_utils.StepVote) -> tuple[bool, bool]:
    """(write a mid-epoch checkpoint now, then stop): every checkpoint_every_steps, when the
    checkpoint_every_minutes clock ran out (the ranks' vote), and on a stop request."""
    train = run.train
    stop_now = bool(vote.stop or (train.stop_after_steps and state.global_step >= train.stop_after_steps))
    every_steps = bool(train.checkpoint_every_steps and state.global_step % train.checkpoint_every_steps == 0)
    return stop_now or every_steps or vote.checkpoint, stop_now


def mid_epoch_checkpoint(run: Run, state: RunState, sums: EpochSums, dev: DeviceSums, offset: int) -> None:
    """Checkpoint inside the epoch: the device sums and the sampler's position go with it."""
    read_into(sums, dev)
    state.partial = dataclasses.asdict(sums)
    save_checkpoint(run, state, (LAST,), run.loaders.train_sampler.state_dict(consumed=state.step_in_epoch - offset))


def device_batches(loader, device: torch.device):
    """The loader's batches on the device, each copied (non-blocking, from pinned memory on
    CUDA) before the previous one is handed out, so the copy is queued ahead of its step."""
    upcoming = None
    for batch in loader:
        batch = batch.to(device, non_blocking=True)
        if upcoming is not None:
            yield upcoming
        upcoming = batch
    if upcoming is not None:
        yield upcoming


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_epoch(run: Run, state: RunState, epoch: int, position: EpochPosition | None) -> dict[str, Any]:
    """Train one epoch (or its rest, after a mid-epoch resume); returns the epoch's training record.
    The host reads the device only every log_every steps, at checkpoints and at the end."""
    sums, offset = start_epoch(run, state, epoch, position)
    sampler = run.loaders.train_sampler
    record = {"epoch": epoch, **sampler.plan.stats(run.loaders.train_set.frames, run.n_frames_per_step)}
    run.parts.model.train()
    dev = DeviceSums.for_epoch(dataclasses.asdict(sums), run.device)
    bar = tqdm(
        device_batches(run.loaders.train_loader, run.device),
        total=len(sampler),  # the epoch's steps, those before a resume included
        initial=state.step_in_epoch,
        desc=f"epoch {epoch}",
        leave=False,
        dynamic_ncols=True,
        disable=None if run.train.progress and run.info.is_main else True,
    )  # None: off when no terminal
    tick, copied = time.perf_counter(), False
    for batch in bar:
        lr = learning_rate(run.train, run.batching.batch_size, state.global_step, len(batch.text_lengths_host))
        result = train_step(run.parts, batch, lr, loop_shape(run.shapes, batch))
        if copied:  # the previous step's copy: finished, or nearly, while this step was queued
            check_bad_steps(run, epoch, state.step_in_epoch, dev.read()["bad_in_row"])
        dev.add(result)
        dev.start_copy()
        copied = True
        sums.frames += batch.frames
        state.step_in_epoch += 1
        state.global_step += 1
        if state.global_step % run.train.log_every == 0:
            log_step(run, state, dev.read(), bar)
        due, stop_now = checkpoint_due(run, state, step_vote(run, state.global_step))
        if due:  # training time excludes the checkpoint's
            synchronize(run.device)
            sums.seconds += time.perf_counter() - tick
            mid_epoch_checkpoint(run, state, sums, dev, offset)
            if stop_now:
                raise StopRequested
            tick = time.perf_counter()
    bar.close()
    synchronize(run.device)
    sums.seconds += time.perf_counter() - tick
    check_bad_steps(run, epoch, state.step_in_epoch, read_into(sums, dev)["bad_in_row"])
    if sums.skipped and not sums.steps:  # a loss over no step would read as 0; nothing was learned
        raise TrainingDiverged(
            f"every one of the {sums.skipped} steps of epoch {epoch} was skipped for a non-finite loss or gradient; "
            f"stopping. {last_good(run)}. Check the data (python train.py --check with the same --hparams), or try "
            "a lower learning_rate or amp=off."
        )
    return record | epoch_record(run, sums)


def epoch_record(run: Run, sums: EpochSums) -> dict[str, Any]:
    """Losses and frames summed over ranks; time and step counts are this rank's."""
    total = dist_utils.sum_over_ranks(sums, run.info, run.device)
    steps = max(total.steps, 1)
    return {
        "train_loss_valid": total.loss_valid / steps,
        "train_loss_padded": total.loss_padded / steps,
        "train_guided_attention": total.guided / steps,
        "train_seconds": sums.seconds,
        "steps": sums.steps + sums.skipped,
        "skipped_steps": sums.skipped,
        "train_frames_per_second": total.frames / max(sums.seconds, 1e-9),
        "steps_per_rank": dist_utils.gather_objects(sums.steps + sums.skipped, run.info),
    }


@torch.no_grad()
def validate(run: Run, epoch: int) -> dict[str, float]:
    """Teacher-forced validation over RAND batches; sums over ranks so every rank agrees."""
    core = run.parts.core
    dist_utils.average_buffers(core, run.info)
    core.eval()
    run.loaders.val_sampler.set_epoch(0)  # the same validation batches every time
    sums, first = ValSums(), None
    with torch.random.fork_rng(devices=[run.device] if run.device.type == "cuda" else []):
        torch.manual_seed(VAL_SEED)
        for batch in run.loaders.val_loader:
            batch = batch.to(run.device)
            out = core(batch)
            terms = run.parts.criterion(out, batch)
            frames = float(batch.mel_lengths.sum())
            sums.loss_valid_frames += float(terms.valid.total) * frames
            sums.frames += frames
            sums.loss_padded += float(terms.padded.total)
            sums.batches += 1
            sums.diagonality += sum(
                alignment_diagonality(*_alignment(batch, out, i)) for i in range(len(batch.mel_lengths))
            )
            first = first or (batch, out)
    total = dist_utils.sum_over_ranks(sums, run.info, run.device)
    if first is not None and run.info.is_main:
        log_figures(run, epoch, *first)
    run.parts.model.train()
    return {
        "val_loss_valid": total.loss_valid_frames / max(total.frames, 1),
        "val_loss_padded": total.loss_padded / max(total.batches, 1),
        "val_diagonality": total.diagonality / max(len(run.loaders.val_set), 1),
    }


def _alignment(batch: Batch, out: Tacotron2Output, i: int) -> tuple[np.ndarray, int, int]:
    """Utterance i's alignment [decoder steps, text] without padding, its text and decoder lengths."""
    dec_len = ceil_div(int(batch.mel_lengths[i]), out.n_frames_per_step)
    text_len = int(batch.text_lengths[i])
    return out.alignments[i, :dec_len, :text_len].float().cpu().numpy(), text_len, dec_len


def log_figures(run: Run, epoch: int, batch: Batch, out: Tacotron2Output) -> None:
    """The first validation utterance's alignment, mel and gate: TensorBoard, and PNGs in the run dir."""
    length = int(batch.mel_lengths[0])
    alignment, _, _ = _alignment(batch, out, 0)
    run.logger.figure("val/alignment", plot_alignment(alignment, f"epoch {epoch}"), epoch, "alignment.png")
    run.logger.figure(
        "val/mel",
        plot_mel(batch.mel[0, :, :length].cpu().numpy(), out.mel_postnet[0, :, :length].float().cpu().numpy()),
        epoch,
        "mel.png",
    )
    run.logger.figure(
        "val/gate",
        plot_gate(batch.gate[0, :length].cpu().numpy(), torch.sigmoid(out.gate[0, :length]).float().cpu().numpy()),
        epoch,
    )


def finish_epoch(run: Run, state: RunState, record: dict[str, Any]) -> None:
    """Record the epoch, print its line, write BEST (when validation improved) and LAST, then
    metrics.jsonl and the epoch's TensorBoard scalars. BEST goes first: a kill between the two
    then redoes the epoch from the older LAST, instead of leaving a BEST that missed it."""
    norm = run.train.loss_norm
    record["train_loss"] = record["train_loss_" + norm]
    if "val_loss_valid" in record:
        record["val_loss"] = record["val_loss_" + norm]
    state.epoch, state.step_in_epoch, state.partial = record["epoch"] + 1, 0, None
    state.records = state.records + [record]
    run.log(epoch_line(record))
    improved = record.get("val_loss_valid", math.inf) < state.best_val
    state.best_val = min(state.best_val, record.get("val_loss_valid", math.inf))
    save_checkpoint(run, state, (BEST, LAST) if improved else (LAST,))
    if run.info.is_main:
        write_metrics(run.run_dir, state.records)
    # after LAST: scalars logged before it would be logged twice when a kill makes the epoch run again
    run.logger.scalars({k: v for k, v in record.items() if k != "epoch"}, record["epoch"], "epoch")
    run.logger.flush()


def epoch_line(record: dict[str, Any]) -> str:
    line = (
        f"epoch {record['epoch']:4d} | {record['train_seconds']:7.1f}s | {record['n_batches']} batches | "
        f"ZPR {record['zpr']:5.2f}% ABL {record['abl']:6.1f} | train {record['train_loss']:.4f}"
    )
    if record["skipped_steps"]:  # the loss above is over the steps that ran
        line += f" ({record['skipped_steps']} of {record['steps']} steps skipped: non-finite)"
    if "val_loss" in record:
        line += (
            f" | val {record['val_loss_valid']:.4f} (padded {record['val_loss_padded']:.4f}) "
            f"| diagonal {record['val_diagonality']:.2f}"
        )
    return line
