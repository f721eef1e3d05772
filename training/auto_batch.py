"""batch_size=auto: the run's B0, found when it starts, once the device and the training lengths are known.

On the CPU it is the paper's 16, without a probe. On a GPU it is the largest B0 whose training step
fits the memory free at the start with HEADROOM to spare, found by the search of
training/batch_probe.py (double from 16, then bisect to 5 %). Each test of a B0 plans epoch 0 at
that B0 with the run's batching, takes the plan's longest shape (most frames) and its largest
(rows x frames), and for each runs one real training step (forward, backward, clip, Adam) on a
random batch of exactly that shape, on fresh parts and, where the run graphs its decoder loop, that
shape's CUDA graphs: it fits when it raised no out-of-memory error and its peak memory, plus the
static buffers of the plan's other shapes (the run captures them all) and, under DDP, the gradient
buckets, stays under (1 - HEADROOM) of the free memory. The reading is a MemoryGauge: CudaGauge on
a GPU; HostGauge, the CPU's peak against a given limit, lets the tests drive the same search.

The answer is cached (CACHE_NAME in the mel cache folder; none with mel_cache_dir="") per GPU model,
its memory, the torch version and everything that sizes a step, so a second start does not probe.
A damaged cache file is ignored with a warning and rewritten. The run stores the resolved B0 and
learning rate in its hparams (training/config.py with_batch_size), so a resume never resolves again.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from batching import BatchingConfig, plan_global
from batching.analysis import resolve_width
from data.collate import TextMelCollate
from model import Batch, Tacotron2, Tacotron2Config
from model.graphs import loop_memory
from model.shapes import LoopShape, ShapeTable, shape_table_of
from training import distributed as dist_utils
from training.batch_probe import PAPER_B0, largest_fitting
from training.config import TrainConfig, with_batch_size
from training.held_memory import peak_bytes
from training.step import build_step_parts, graphs_wanted, train_step, with_graphs

#: The share of the free memory a probed step must leave unused (fragmentation, the loaders' pinned
#: batches, what the plans of later epochs add to epoch 0's shapes).
HEADROOM = 0.10
#: The cache file, in the mel cache folder.
CACHE_NAME = "batch_size_auto.json"


class MemoryGauge(Protocol):
    """How a probe reads memory: what is free before it, and the most a piece of work used."""

    def free(self) -> int: ...

    def peak(self, work: Callable[[], Any]) -> int: ...


@dataclass(frozen=True)
class CudaGauge:
    """The GPU's free memory, and the allocator's peak reserved memory over the work (reserved, not
    allocated: CUDA graphs' pools and fragmentation take memory no tensor holds)."""

    device: torch.device

    def free(self) -> int:
        return torch.cuda.mem_get_info(self.device)[0]

    def peak(self, work: Callable[[], Any]) -> int:
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        before = torch.cuda.memory_reserved(self.device)
        work()
        torch.cuda.synchronize(self.device)
        return torch.cuda.max_memory_reserved(self.device) - before


@dataclass(frozen=True)
class HostGauge:
    """A simulated GPU on the CPU: `limit` bytes free, and the work's peak tensor bytes
    (training/held_memory.py), so that the tests run the GPU's search on the CPU."""

    limit: int

    def free(self) -> int:
        return self.limit

    def peak(self, work: Callable[[], Any]) -> int:
        return peak_bytes(work)[1]


@dataclass(frozen=True)
class ProbeSetup:
    """What a probe of one B0 reads: the run's configs, its training lengths, where it runs."""

    train: TrainConfig
    model: Tacotron2Config
    batching: BatchingConfig
    frames: np.ndarray  # the training set's mel frames
    text_lengths: np.ndarray  # and text lengths
    device: torch.device
    gauge: MemoryGauge
    world_size: int = 1
    headroom: float = HEADROOM
    log: Callable[[str], None] | None = None  # each probe's verdict (the main rank's print)
    statics: dict = field(default_factory=dict, compare=False)  # LoopShape -> its static bytes, memoised


def probe_table(setup: ProbeSetup, b0: int) -> ShapeTable:
    """Epoch 0's shapes at B0 = b0 (SSB's width calibrated at b0, as the run's sampler would): the
    padded shapes of graph_bucket, or with graph_bucket=0 the batches' own (frames rounded to r)."""
    config, _ = resolve_width(setup.frames, dataclasses.replace(setup.batching, batch_size=b0))
    longest, sizes = plan_global(setup.frames, config, 0, setup.world_size).extents(setup.frames)
    return shape_table_of(
        longest, sizes, setup.frames, setup.text_lengths, setup.train.graph_bucket or setup.model.n_frames_per_step
    )


def probe_shapes(table: ShapeTable) -> list[LoopShape]:
    """The shapes a probe runs, in order: the longest (most frames), then the largest (rows x frames)."""
    shapes = table.shapes()
    longest = max(shapes, key=lambda shape: (shape.frames, shape.rows))
    largest = max(shapes, key=lambda shape: (shape.rows * shape.frames, shape.frames))
    return [longest] + ([largest] if largest != longest else [])


def fits(setup: ProbeSetup, b0: int) -> bool:
    """Whether a run at B0 = b0 fits: each probe shape's step runs and, with what the run holds
    beside it, leaves setup.headroom of the free memory (module doc)."""
    table = probe_table(setup, b0)
    graphed = bool(setup.train.graph_bucket) and graphs_wanted(setup.train.cuda_graphs, setup.device)
    statics = {shape: static_bytes(setup, shape) for shape in table.shapes()} if graphed else {}
    buckets = parameter_bytes(setup.model) if setup.world_size > 1 else 0  # DDP's gradient buckets, always held
    for shape in probe_shapes(table):
        free = setup.gauge.free()
        try:
            used = setup.gauge.peak(partial(probe_step, setup, shape))
        except RuntimeError as err:  # torch.OutOfMemoryError, or cuBLAS's and a capture's own words for it
            if "out of memory" not in str(err).lower():
                raise
            used = None
        finally:
            release(setup.device)
        beside = sum(statics.values()) - statics.get(shape, 0) + buckets
        ok = used is not None and used + beside <= (1 - setup.headroom) * free
        if setup.log is not None:
            found = "out of memory" if used is None else f"{(used + beside) / 2**30:.2f} GiB"
            setup.log(
                f"batch_size=auto: B0 {b0} at {shape}: {found} of {free / 2**30:.2f} GiB free -> "
                f"{'fits' if ok else 'does not fit'}"
            )
        if not ok:
            return False
    return True


def probe_step(setup: ProbeSetup, shape: LoopShape) -> None:
    """One training step on fresh parts and a random batch of exactly `shape` (on the shape's
    static buffers where the run graphs its loop)."""
    parts = build_step_parts(setup.train, setup.model, setup.device)
    graph_shape = shape if setup.train.graph_bucket else None
    if graph_shape is not None:
        table = ShapeTable(setup.train.graph_bucket, {shape.frames: shape.rows}, {shape.frames: shape.text})
        parts = with_graphs(parts, setup.train.cuda_graphs, table, setup.device)
    train_step(parts, random_batch(shape, setup.model, setup.device), shape=graph_shape)


def random_batch(shape: LoopShape, model: Tacotron2Config, device: torch.device) -> Batch:
    """shape.rows utterances of shape.text random symbols and shape.frames random mel frames, padded by
    the training collate."""
    pairs = [
        (torch.randint(1, model.n_symbols, (shape.text,)), torch.randn(model.n_mel_channels, shape.frames))
        for _ in range(shape.rows)
    ]
    return TextMelCollate(model.n_frames_per_step)(pairs).to(device)


def static_bytes(setup: ProbeSetup, shape: LoopShape) -> int:
    """The static buffers a captured shape holds for the whole run (model/graphs.py loop_memory, on
    the meta device), memoised in the setup."""
    if shape not in setup.statics:
        with torch.device("meta"):
            decoder = Tacotron2(setup.model).decoder
        setup.statics[shape] = loop_memory(decoder, shape)["static"]
    return setup.statics[shape]


def parameter_bytes(model: Tacotron2Config) -> int:
    """The model's parameters in bytes (DDP's gradient buckets hold as much)."""
    with torch.device("meta"):
        return sum(p.numel() * p.element_size() for p in Tacotron2(model).parameters())


def release(device: torch.device) -> None:
    """Free what a probe left (its parts, graphs and batch are garbage once it returns)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def probe_b0(setup: ProbeSetup) -> int:
    """The largest B0 that fits (training/batch_probe.py's search over fits())."""
    return largest_fitting(partial(fits, setup))


def cache_key(setup: ProbeSetup, hardware: str) -> str:
    """A digest of what decides the answer: the GPU (`hardware`: its name and memory), torch's
    version, the model, the step's settings, the batching, the ranks and the training lengths."""
    train = setup.train
    sized = {
        "hardware": hardware,
        "torch": torch.__version__,
        "model": dataclasses.asdict(setup.model),
        "step": [train.amp, train.matmul_precision, train.graph_bucket, train.cuda_graphs, setup.headroom],
        "batching": dataclasses.asdict(dataclasses.replace(setup.batching, batch_size=PAPER_B0)),
        "world_size": setup.world_size,
        "lengths": hashlib.sha1(np.stack([setup.frames, setup.text_lengths]).astype(np.int64)).hexdigest(),
    }
    return hashlib.sha1(json.dumps(sized, sort_keys=True, default=str).encode()).hexdigest()


def gpu_identity(device: torch.device) -> str:
    """The GPU model and its memory: what a cached answer is valid for."""
    props = torch.cuda.get_device_properties(device)
    return f"{props.name}|{props.total_memory}"


def read_cache(path: Path) -> dict[str, int]:
    """Key -> B0 from the cache file ({} when there is none). A damaged file is derived data: one
    warning, and it is rewritten by the next write_cache."""
    try:
        entries = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        print(
            f"warning: batch_size=auto cache {path} is unreadable ({err}); probing again, it will be rewritten",
            file=sys.stderr,
        )
        return {}
    if not isinstance(entries, dict) or not all(type(b0) is int and b0 > 0 for b0 in entries.values()):
        print(
            f"warning: batch_size=auto cache {path} does not hold key -> B0 entries; probing again, it will be "
            "rewritten",
            file=sys.stderr,
        )
        return {}
    return entries


def write_cache(path: Path, entries: dict[str, int]) -> None:
    """The cache file holding `entries` (written whole, then moved into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial_file = path.with_name(path.name + ".tmp")
    partial_file.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    partial_file.replace(path)


def gpu_b0(setup: ProbeSetup, cache: Path | None) -> tuple[int, str]:
    """The cached B0 of this GPU and run, else a probe's (then cached); and how it was found."""
    key = cache_key(setup, gpu_identity(setup.device))
    entries = read_cache(cache) if cache is not None else {}
    if key in entries:
        return entries[key], f"cached in {cache}"
    tick = time.perf_counter()
    b0 = probe_b0(setup)
    if cache is not None:
        write_cache(cache, entries | {key: b0})
    return b0, f"probed in {time.perf_counter() - tick:.0f} s" + (f", cached in {cache}" if cache else "")


def cache_file(mel_cache_dir: str) -> Path | None:
    """Where the answers are cached: in the mel cache folder (none when mels are not cached)."""
    return Path(mel_cache_dir) / CACHE_NAME if mel_cache_dir else None


def resolve_batch_size(
    train: TrainConfig,
    model: Tacotron2Config,
    batching: BatchingConfig,
    mel_cache_dir: str,
    hp: dict[str, Any],
    frames: np.ndarray,
    text_lengths: np.ndarray,
    device: torch.device,
    info: dist_utils.DistInfo,
) -> tuple[TrainConfig, BatchingConfig, dict[str, Any]]:
    """A batch_size=auto run's configs and hparams with its B0 (training/config.py with_batch_size):
    the paper's 16 on the CPU; on a GPU rank 0's answer (cached or probed), which every rank takes.
    One line says what B0 and learning rate the run uses and how they were found."""
    if device.type != "cuda":
        b0, how = PAPER_B0, "the paper's B0 on the CPU (no probe)"
    else:
        setup = ProbeSetup(
            train,
            model,
            batching,
            frames,
            text_lengths,
            device,
            CudaGauge(device),
            info.world_size,
            log=print if info.is_main else None,
        )
        b0, how = dist_utils.decided_by_main(partial(gpu_b0, setup, cache_file(mel_cache_dir)), info)
    resolved, batching, hp = with_batch_size(train, batching, hp, b0)
    if info.is_main:
        print(
            f"batch_size=auto: B0 = {b0}, {how}; learning_rate {resolved.learning_rate:g} "
            f"(lr_batch_scaling={train.lr_batch_scaling}, learning_rate {train.learning_rate:g} given for B0 = "
            f"{PAPER_B0})"
        )
    return resolved, batching, hp
