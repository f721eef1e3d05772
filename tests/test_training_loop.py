"""The training step never waits for the device: no host read of a tensor and no ATen operation
that synchronises on CUDA inside the training loop (counted with a torch function mode and a
dispatch mode), and a non-finite step is skipped on the device, leaving the weights and Adam's
state exactly as they were."""

import dataclasses
import functools
import traceback

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

import train
import training.loop
from model.batch import HOST_FIELDS
from tests.kit import DemoCorpus, build_demo_corpus, step_parts_and_batches, tiny
from training.device_sums import DeviceSums
from training.rundir import read_metrics
from training.step import load_optimizer_state, train_step

#: Tensor methods that copy a device value to the host (and wait for the device to get there).
HOST_READS = {"item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__"}
#: Where the loop may read: before the first step (the host mirror of the sums is made once an
#: epoch), after the last step, and while writing a checkpoint.
ALLOWED = {"start_epoch", "for_epoch", "epoch_record", "mid_epoch_checkpoint", "save_checkpoint"}

aten = torch.ops.aten
#: ATen operations that make the host wait for a CUDA device, whoever calls them (the torch function
#: mode sees only Python-level reads; these come from inside torch too, e.g. x[mask]):
#: - a value copied to the host: _local_scalar_dense (item(), float(t), int(t)), item, is_nonzero
#:   (bool(t)), equal (returns a Python bool);
#: - an output whose size is a device value, which the host must learn before it can allocate:
#:   nonzero (also torch.where(cond), argwhere), masked_select, the unique family, bincount (max + 1);
#: - masked_scatter: CUDA kernels of some torch versions read mask.sum() to check the source size.
#: Checked by argument (SYNC_IF): index / index_put with a boolean or uint8 index (a nonzero first),
#: and repeat_interleave with a tensor of repeats and no output_size (the sum of the repeats).
#: Not visible on the CPU: device-to-host copies (the function mode's cpu/tolist/numpy cover
#: Python's), and syncs inside CUDA kernels; tests of the CUDA step under
#: torch.cuda.set_sync_debug_mode("error") see those.
SYNC_OPS = {
    aten._local_scalar_dense,
    aten.item,
    aten.is_nonzero,
    aten.equal,
    aten.nonzero,
    aten.masked_select,
    aten._unique,
    aten._unique2,
    aten.unique_dim,
    aten.unique_consecutive,
    aten.bincount,
    aten.masked_scatter,
    aten.masked_scatter_,
}
BOOL_INDEXED = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}


class Reads:
    """Where each host read or syncing operation of a train_epoch was made; those of the data
    pipeline's own CPU tensors (collate, dataset, DataLoader) are not device reads."""

    def __init__(self):
        self.in_steps, self.allowed = [], []

    def record(self, name: str, stack: list) -> None:
        names = {frame.name for frame in stack}
        if "train_epoch" not in names or any("/data/" in f.filename or "torch/utils/data" in f.filename for f in stack):
            return
        ours = [f for f in stack if "site-packages" not in f.filename and f.filename != __file__][-1]
        where = (name, ours.filename.rsplit("/", 2)[-1], ours.lineno, ours.line)
        (self.allowed if names & ALLOWED else self.in_steps).append(where)


class HostReads(TorchFunctionMode):
    """Records the Python-level host reads (HOST_READS)."""

    def __init__(self, reads: Reads):
        super().__init__()
        self.reads = reads

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in HOST_READS:
            self.reads.record(func.__name__, traceback.extract_stack()[:-1])
        return func(*args, **(kwargs or {}))


def argument(func, args: tuple, kwargs: dict, name: str):
    """An ATen operation's argument by its schema name (None when left at its default)."""
    for position, arg in enumerate(func._schema.arguments):
        if arg.name == name:
            return args[position] if position < len(args) else kwargs.get(name)
    return None


def syncs(func, args: tuple, kwargs: dict) -> bool:
    """True when the operation makes the host wait for a CUDA device (SYNC_OPS)."""
    packet = func.overloadpacket
    if packet in BOOL_INDEXED:
        return any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in args[1])
    if func is aten.repeat_interleave.Tensor:
        return argument(func, args, kwargs, "output_size") is None
    return packet in SYNC_OPS


def tensors(values) -> list[torch.Tensor]:
    flat = [v for value in values for v in (value if isinstance(value, (list, tuple)) else [value])]
    return [t for t in flat if isinstance(t, torch.Tensor)]


class DeviceSyncs(TorchDispatchMode):
    """Records each syncing ATen operation on a device tensor. The CPU run cannot tell device from
    host tensors, so this follows them: the batch's HOST_FIELDS and the BiLSTM packing's
    batch_sizes (PyTorch keeps them on the CPU) are host tensors, and so is whatever is computed
    from host tensors alone; a syncing operation on those only (the BiLSTM's reads of its
    batch_sizes) is counted in host_reads instead."""

    def __init__(self, reads: Reads):
        super().__init__()
        self.reads, self.host, self.host_reads = reads, WeakIdKeyDictionary(), 0

    def mark_host(self, batch) -> None:
        for name in HOST_FIELDS:
            if isinstance(getattr(batch, name), torch.Tensor):
                self.host[getattr(batch, name)] = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = tensors([*args, *kwargs.values()])
        on_host = bool(inputs) and all(t in self.host for t in inputs)
        if syncs(func, args, kwargs):
            if on_host:
                self.host_reads += 1
            else:
                self.reads.record(str(func), traceback.extract_stack()[:-1])
        out = func(*args, **kwargs)
        produced = tensors(out if isinstance(out, (list, tuple)) else [out])
        for t in produced if on_host else produced[1:2] if func is aten._pack_padded_sequence.default else []:
            self.host[t] = True
        return out


def host_marked_batches(device_batches, syncs_mode: DeviceSyncs, loader, device):
    """training.loop.device_batches, telling the dispatch mode which tensors of each batch stay on the host."""
    for batch in device_batches(loader, device):
        syncs_mode.mark_host(batch)
        yield batch


# The plain loop runs in the quick lane, the other four in `make test` only (docs/development.md, "Lanes").
SLOW = pytest.mark.slow


@pytest.fixture(scope="module")
def half_demo_corpus(tmp_path_factory) -> DemoCorpus:
    """A 20-utterance demo corpus (16 train, 4 validation): every step under the two modes costs
    their bookkeeping, and 4 steps an epoch still log (log_every=3), checkpoint mid-epoch
    (checkpoint_every_steps=5: in epoch 1) and cross an epoch."""
    return build_demo_corpus(tmp_path_factory.mktemp("half_demo_corpus"), utterances=20)


@pytest.mark.parametrize(
    "variant",
    [
        "graph_bucket=0",
        pytest.param("graph_bucket=16", marks=SLOW),
        pytest.param("graph_bucket=16,cuda_graphs=true", marks=SLOW),
        pytest.param("batching=bload", marks=SLOW),
        pytest.param("batching=bload,fast_decoder=false", marks=SLOW),
    ],
)
def test_no_host_reads_nor_syncing_ops_inside_the_training_loop(tmp_path, monkeypatch, variant, half_demo_corpus):
    """Two epochs with log_every=3 and a mid-epoch checkpoint, plain, with the bucketed decoder loop
    (eager, and on its static buffers: the CUDA-graph path) and with BLoad blocks (fast and plain decoder loops):
    every host read of the loop falls before
    the first step, after the last one or in the checkpoint (the function mode sees those: it is
    live), and no step runs an ATen operation that would wait for a CUDA device (the dispatch
    mode sees the BiLSTM's reads of its CPU batch sizes and knows them for host reads: it is live).
    Four frames a decoder step: the same loop in half the steps, each costing both modes' bookkeeping per operation."""
    hp = tiny(
        tmp_path, f"epochs=2,log_every=3,checkpoint_every_steps=5,n_frames_per_step=4,{variant}", half_demo_corpus
    )
    reads = Reads()
    device_syncs = DeviceSyncs(reads)
    monkeypatch.setattr(
        training.loop,
        "device_batches",
        functools.partial(host_marked_batches, training.loop.device_batches, device_syncs),
    )
    with HostReads(reads), device_syncs:
        assert train.main(["--hparams", hp]) == 0
    assert not reads.in_steps, sorted(set(reads.in_steps))
    assert reads.allowed, "the function mode saw no read at all; it would not see one in the steps either"
    assert device_syncs.host_reads > 0, "the dispatch mode saw no operation at all in the steps"
    steps = [r["steps"] for r in read_metrics(tmp_path / "run")]
    assert 3 <= steps[0] < 5 < sum(steps), steps  # a log step in epoch 0, the step-5 checkpoint inside epoch 1


def test_the_dispatch_mode_flags_every_syncing_op_and_only_those():
    """Each kind of syncing operation is recorded where it runs; fixed-size indexing is not, nor
    an operation on host tensors."""
    x, mask = torch.arange(6.0), torch.arange(6) % 2 == 0
    index, host = torch.tensor([0, 2, 4]), torch.tensor([3, 1])
    syncing = [
        lambda: x[mask],
        lambda: x.masked_fill(mask, 0.0)[mask.nonzero()],
        lambda: float(x.sum()),
        lambda: bool(x.any()),
        lambda: torch.unique(index),
        lambda: x.masked_select(mask),
        lambda: x.clone().index_put_((mask,), torch.zeros(3)),
        lambda: index.repeat_interleave(index),
        lambda: torch.bincount(index),
        lambda: torch.equal(x, x),
    ]
    fine = [
        lambda: x[index],
        lambda: x.index_select(0, index),
        lambda: torch.where(mask, x, 0.0),
        lambda: x.clone().index_put_((index,), torch.zeros(3)),
        lambda: x.repeat_interleave(2),
        lambda: index.repeat_interleave(index, output_size=6),
        lambda: int(host.sum()),
    ]
    for case in syncing + fine:
        reads = Reads()
        mode = DeviceSyncs(reads)
        mode.host[host] = True
        with mode:
            train_epoch(reads, case)
        assert len(reads.in_steps) == (case in syncing), (case.__code__.co_firstlineno, reads.in_steps)


def train_epoch(reads: Reads, case) -> None:
    """Runs `case` under a frame named like the training loop's, so that Reads counts it as in a step."""
    case()


def optimizer_state(parts) -> list[torch.Tensor]:
    state = parts.optimizer.state_dict()["state"]
    return [t.clone() for s in state.values() for t in (s["step"], s["exp_avg"], s["exp_avg_sq"])]


def test_a_nan_step_is_skipped_on_the_device_and_counted(tmp_path):
    parts, (good, other, last) = step_parts_and_batches()
    sums = DeviceSums.for_epoch({}, torch.device("cpu"))
    sums.add(train_step(parts, good))
    weights = [p.detach().clone() for p in parts.core.parameters()]
    adam = optimizer_state(parts)

    poisoned = dataclasses.replace(other, mel=other.mel.clone().index_fill_(2, torch.tensor([3]), float("nan")))
    result = train_step(parts, poisoned)
    sums.add(result)
    assert float(result.skipped) == 1.0 and not torch.isfinite(result.grad_norm)
    assert all(torch.equal(a, b) for a, b in zip(weights, parts.core.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(adam, optimizer_state(parts)))  # step count too
    sums.start_copy()
    assert {k: sums.read()[k] for k in ("steps", "skipped", "bad_in_row")} == {
        "steps": 1,
        "skipped": 1,
        "bad_in_row": 1,
    }
    assert torch.isfinite(sums.values[:5]).all()  # the NaN loss was not summed (the last-step slots show it)

    sums.add(train_step(parts, last))  # a good step applies, and ends the run of bad ones
    sums.start_copy()
    assert {k: sums.read()[k] for k in ("steps", "skipped", "bad_in_row")} == {
        "steps": 2,
        "skipped": 1,
        "bad_in_row": 0,
    }
    assert not all(torch.equal(a, b) for a, b in zip(weights, parts.core.parameters()))
    assert optimizer_state(parts)[0].item() == 2.0


def test_resuming_an_unfused_checkpoint_keeps_the_fused_step(tmp_path):
    """Checkpoints from before the fused step store fused=None; loading one must not switch the
    fused update off (the unfused Adam refuses found_inf), and the moments carry over."""
    parts, (good, other, _) = step_parts_and_batches()
    old = torch.optim.Adam(parts.core.parameters(), lr=1e-3)
    parts.core(good).mel_postnet.sum().backward()
    old.step()
    load_optimizer_state(parts.optimizer, old.state_dict())
    assert all(group["fused"] for group in parts.optimizer.param_groups)
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            optimizer_state(parts),
            [t for s in old.state_dict()["state"].values() for t in (s["step"], s["exp_avg"], s["exp_avg_sq"])],
        )
    )
    result = train_step(parts, other)
    assert float(result.skipped) == 0.0 and optimizer_state(parts)[0].item() == 2.0
