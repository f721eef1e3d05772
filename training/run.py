"""A run's parts, built once from the config: devices and ranks, data loaders, the training step's
parts, the logger, the stop flag and the checkpoint clock. `Run` is the small frozen bundle the
loop functions take."""

from __future__ import annotations

import dataclasses
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from batching import BatchingConfig, plan_global
from batching.analysis import calibrated_line
from batching.sampler import PlanBatchSampler
from data.audio import MelConfig
from data.collate import TextMelCollate
from data.corpora import DataConfig, corpus_filelists
from data.dataset import TextMelDataset, build_datasets
from data.loader import loader_parts
from model import Tacotron2Config
from model.shapes import ShapeTable, shape_table_of
from training import distributed as dist_utils
from training.auto_batch import resolve_batch_size
from training.checkpoint import CheckpointClock, ResumePoint, RunState
from training.config import RunConfig, TrainConfig
from training.datacheck import check_data
from training.hparams import HParamsError
from training.run_logger import RunLogger
from training.step import StepParts, build_step_parts, load_optimizer_state, with_graphs
from training.warm_start import WarmStart


class StopFlag:
    """Set by SIGINT/SIGTERM: the loop finishes its step, writes a checkpoint and stops.
    A second signal aborts at once (KeyboardInterrupt)."""

    def __init__(self, announce: bool) -> None:
        self.hit = False
        self.announce = announce
        self._previous: dict[int, Any] = {}

    def handler(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        if self.hit:
            raise KeyboardInterrupt
        self.hit = True
        if self.announce:
            print("\nstop requested: finishing this step, then writing a checkpoint (press again to abort)")

    def install(self) -> None:
        self._previous = {sig: signal.signal(sig, self.handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}


@dataclass(frozen=True)
class Loaders:
    """The data of a run, as build_loaders makes it: each split's dataset, batch sampler and loader."""

    train_set: TextMelDataset
    train_sampler: PlanBatchSampler
    train_loader: DataLoader
    val_set: TextMelDataset
    val_sampler: PlanBatchSampler
    val_loader: DataLoader


@dataclass(frozen=True)
class Run:
    """Everything the epoch loop, validation and checkpointing use."""

    train: TrainConfig
    batching: BatchingConfig
    hp: dict[str, Any]  # the flat hparams, stored in checkpoints so that a resume rebuilds the same run
    info: dist_utils.DistInfo
    device: torch.device
    run_dir: Path
    parts: StepParts
    loaders: Loaders
    logger: RunLogger
    stop: StopFlag
    clock: CheckpointClock  # time since the last checkpoint (checkpoint_every_minutes)
    shapes: ShapeTable | None  # the decoder loop's padded shapes for the whole run (graph_bucket > 0)

    @property
    def n_frames_per_step(self) -> int:
        """The decoder's r, read from the model's config (its one source)."""
        return self.parts.core.cfg.n_frames_per_step

    def log(self, message: str) -> None:
        """Print on the main rank only."""
        if self.info.is_main:
            print(message)


def pick_device(name: str, local_rank: int) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        name = f"cuda:{local_rank}"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise HParamsError(
            f"hparam 'device': {name} asked for, but this PyTorch sees no CUDA GPU; use device=cpu "
            "(or install a CUDA build of torch)"
        )
    return torch.device(name)


def load_datasets(
    progress: bool, batching: BatchingConfig, data: DataConfig, mel: MelConfig, info: dist_utils.DistInfo
) -> tuple[TextMelDataset, TextMelDataset]:
    """The training and validation sets, once the data check passed (rank 0 first: it generates
    corpora and fills the caches, the others reuse them)."""
    progress = progress and info.is_main
    with dist_utils.main_rank_first(info):
        paths = corpus_filelists(data, mel)
        report = check_data(paths, mel, batching, data, progress)
        if info.is_main:
            for line in report.text.lines():
                print(line)
        return build_datasets(paths, mel, data.mel_cache_dir, progress, data.unknown_chars)


def build_loaders(
    train_cfg: TrainConfig,
    batching: BatchingConfig,
    train_set: TextMelDataset,
    val_set: TextMelDataset,
    n_frames_per_step: int,
    info: dist_utils.DistInfo,
    device: torch.device,
) -> Loaders:
    """Each split's sampler and loader over its dataset (load_datasets); validation always uses
    RAND batches of val_batch_size, unpacked (as in the paper)."""
    train = loader_parts(train_set, batching, n_frames_per_step, info.rank, info.world_size)
    val_cfg = BatchingConfig(batching="rand", batch_size=train_cfg.val_batch_size, seed=train_cfg.seed)
    val_sampler = PlanBatchSampler(val_set.frames, val_cfg, info.rank, info.world_size)
    common = dict(
        num_workers=train_cfg.num_workers,
        pin_memory=device.type == "cuda",
        persistent_workers=train_cfg.num_workers > 0,
    )
    train_loader = DataLoader(
        train.dataset, batch_sampler=train.sampler, collate_fn=train.collate, generator=torch.Generator(), **common
    )
    val_loader = DataLoader(
        val_set,
        batch_sampler=val_sampler,
        collate_fn=TextMelCollate(n_frames_per_step),
        generator=torch.Generator(),
        **common,
    )
    return Loaders(
        train_set=train_set,
        train_sampler=train.sampler,
        train_loader=train_loader,
        val_set=val_set,
        val_sampler=val_sampler,
        val_loader=val_loader,
    )


def run_shape_table(
    train: TrainConfig, batching: BatchingConfig, train_set: TextMelDataset, world_size: int
) -> ShapeTable | None:
    """The decoder loop's shapes for the whole run (None with graph_bucket=0): from every epoch's
    global plan, so that every epoch and every rank uses the same few shapes. batching: the train
    sampler's config (lrf as it calibrated it, when the hparams ask for a target)."""
    if not train.graph_bucket:
        return None
    longest, sizes = zip(
        *(
            plan_global(train_set.frames, batching, epoch, world_size).extents(train_set.frames)
            for epoch in range(train.epochs)
        )
    )
    return shape_table_of(
        np.concatenate(longest), np.concatenate(sizes), train_set.frames, train_set.text_lengths, train.graph_bucket
    )


def uses_cuda(device: str) -> bool:
    """Whether the hparam `device` asks for a GPU: cuda, cuda:N, or auto where one is visible."""
    return device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())


def restored_parts(
    train: TrainConfig,
    model: Tacotron2Config,
    device: torch.device,
    resume: ResumePoint | None,
    init: WarmStart | None = None,
) -> StepParts:
    """The training step's parts, with the weights and the optimiser's and scaler's states of `resume`,
    or a new run's model started from `init`'s weights (a fresh optimiser)."""
    parts = build_step_parts(train, model, device)
    if resume is not None:
        parts.core.load_state_dict(resume.weights.model)
        load_optimizer_state(parts.optimizer, resume.weights.optimizer)
        parts.scaler.load_state_dict(resume.weights.scaler)
    elif init is not None:
        init.load_into(parts.core)
    return parts


def build_run(cfg: RunConfig, hp: dict[str, Any], resume: ResumePoint | None, init: WarmStart | None = None) -> Run:
    """The composition root: set up everything in the recipe's order (ranks, data, B0 for
    batch_size=auto, model, restored from `resume` if given, else started from `init`'s weights),
    handing each part the configs it reads. A rank that dies or stalls meanwhile makes the others
    raise dist_utils.RankFailure."""
    device_kind = "cuda" if uses_cuda(cfg.train.device) else "cpu"
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    run_dir = Path(cfg.train.output_dir)
    info = dist_utils.init_distributed(
        device_kind, cfg.train.collective_timeout_s, run_dir, cfg.train.force_ddp, cfg.train.dist_backend
    )
    device = pick_device(cfg.train.device, info.local_rank)
    with dist_utils.rank_failures(info, run_dir):
        train_set, val_set = load_datasets(cfg.train.progress, cfg.batching, cfg.data, cfg.mel, info)
        if cfg.auto_batch_size:
            train_cfg, batching, hp = resolve_batch_size(
                cfg.train,
                cfg.model,
                cfg.batching,
                cfg.data.mel_cache_dir,
                hp,
                train_set.frames,
                train_set.text_lengths,
                device,
                info,
            )
            cfg = RunConfig(train_cfg, cfg.data, batching, cfg.model, cfg.mel)
        loaders = build_loaders(cfg.train, cfg.batching, train_set, val_set, cfg.model.n_frames_per_step, info, device)
        parts = restored_parts(cfg.train, cfg.model, device, resume, init)
        shapes = run_shape_table(cfg.train, loaders.train_sampler.config, loaders.train_set, info.world_size)
        parts = with_graphs(parts, cfg.train.cuda_graphs, shapes, device, cfg.train.progress and info.is_main)
        if info.enabled:
            # gradients written straight into DDP's buckets; no per-forward buffer broadcast
            # (dist_utils.average_buffers before validation and checkpoints instead); a static graph:
            # every step uses every parameter, in the same order (plain, fast, padded and BLoad).
            # No device_ids: with them DDP moves every tensor argument of forward to the GPU, the
            # CPU text lengths the encoder packs with too; the batch is on the device already.
            ddp = DistributedDataParallel(
                parts.model, broadcast_buffers=False, gradient_as_bucket_view=True, static_graph=True
            )
            parts = dataclasses.replace(parts, model=ddp)
    # TensorBoard hides events at or after this step from earlier event files: those a killed run
    # wrote after its last checkpoint (they are logged again), or all of them for a run started over
    global_step = resume.state.global_step if resume else 0
    logger = RunLogger(run_dir, info.is_main, purge_step=global_step)
    return Run(
        train=cfg.train,
        batching=cfg.batching,
        hp=hp,
        info=info,
        device=device,
        run_dir=run_dir,
        parts=parts,
        loaders=loaders,
        logger=logger,
        stop=StopFlag(announce=info.is_main),
        clock=CheckpointClock(cfg.train.checkpoint_every_minutes * 60),
        shapes=shapes,
    )


def describe(run: Run, state: RunState, resumed: bool) -> None:
    """The run's opening lines: where it resumed, its data, model size, device, batching and decoder loop."""
    if resumed:
        run.log(f"resumed {run.run_dir} at epoch {state.epoch}, step {state.step_in_epoch} of that epoch")
    n_params = sum(p.numel() for p in run.parts.core.parameters())
    batching = run.batching
    loaders = run.loaders
    run.log(
        f"{len(loaders.train_set)} train / {len(loaders.val_set)} val utterances | "
        f"{n_params / 1e6:.2f}M parameters | "
        f"{run.device} x{run.info.world_size} | batching={batching.batching} dbs={batching.dbs} br={batching.br} | "
        f"{run.run_dir}"
    )
    if loaders.train_sampler.calibration:
        run.log(calibrated_line(loaders.train_sampler.calibration))
    if run.shapes is not None:
        graphs = run.parts.graphs
        how = (
            "eager"
            if graphs is None
            else f"CUDA graphs, captured in {graphs.seconds:.1f} s"
            if graphs.captured
            else f"static buffers, eager, built in {graphs.seconds:.1f} s"
        )
        run.log(
            f"decoder loop: {len(run.shapes.shapes())} padded shapes (graph_bucket={run.shapes.graph_bucket}), {how}"
        )
