"""The training step never waits for the device: no host read of a tensor inside the training
loop (counted with a torch function mode), and a non-finite step is skipped on the device,
leaving the weights and Adam's state exactly as they were."""
import traceback

import pytest
import torch
from torch.overrides import TorchFunctionMode

import train
from data.collate import TextMelCollate
from tests.test_train import tiny
from training.config import resolve_config
from training.device_sums import DeviceSums
from training.hparams import load_hparams
from training.step import build_step_parts, load_optimizer_state, train_step

#: Tensor methods that copy a device value to the host (and wait for the device to get there).
HOST_READS = {"item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__"}
#: Where the loop may read: before the first step (the host mirror of the sums is made once an
#: epoch), after the last step, and while writing a checkpoint.
ALLOWED = {"start_epoch", "for_epoch", "epoch_record", "mid_epoch_checkpoint", "save_checkpoint"}


class HostReads(TorchFunctionMode):
    """Records each host read made while train_epoch runs, with where it was made; reads of the
    data pipeline's own CPU tensors (collate, dataset, DataLoader) are not device reads."""

    def __init__(self):
        super().__init__()
        self.in_steps, self.allowed = [], []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in HOST_READS:
            self.record(func.__name__, traceback.extract_stack()[:-1])
        return func(*args, **(kwargs or {}))

    def record(self, name: str, stack: list) -> None:
        names = {frame.name for frame in stack}
        if "train_epoch" not in names or any("/data/" in f.filename or "torch/utils/data" in f.filename for f in stack):
            return
        ours = [f for f in stack if "site-packages" not in f.filename][-1]
        where = (name, ours.filename.rsplit("/", 2)[-1], ours.lineno, ours.line)
        (self.allowed if names & ALLOWED else self.in_steps).append(where)


@pytest.mark.parametrize("variant", ["graph_bucket=0", "graph_bucket=16", "batching=bload"])
def test_no_host_reads_inside_the_training_loop(tmp_path, variant):
    """Two epochs with log_every=3 and a mid-epoch checkpoint, plain, with the bucketed decoder loop
    and with BLoad blocks: every host read of the loop falls before the first step, after the last
    one or in the checkpoint (the mode sees those: it is live)."""
    hp = tiny(tmp_path, f"epochs=2,log_every=3,checkpoint_every_steps=5,{variant}")
    with HostReads() as reads:
        assert train.main(["--hparams", hp]) == 0
    assert reads.in_steps == []
    assert reads.allowed, "the mode saw no read at all; it would not see one in the steps either"


def make_parts_and_batches(r: int = 2):
    hp = load_hparams("dataset=demo,model.symbols_embedding_dim=16,model.encoder_embedding_dim=16,"
                      "model.attention_rnn_dim=32,model.decoder_rnn_dim=32,model.prenet_dim=16,model.attention_dim=8,"
                      "model.attention_location_n_filters=4,model.postnet_embedding_dim=16")
    parts = build_step_parts(resolve_config(hp), torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    collate = TextMelCollate(hp["n_frames_per_step"])
    batches = [collate([(torch.randint(1, 30, (n,), generator=g), torch.randn(80, m, generator=g))
                        for n, m in ((9, 30), (14, 41), (6, 22))]) for _ in range(3)]
    return parts, batches


def optimizer_state(parts) -> list[torch.Tensor]:
    state = parts.optimizer.state_dict()["state"]
    return [t.clone() for s in state.values() for t in (s["step"], s["exp_avg"], s["exp_avg_sq"])]


def test_a_nan_step_is_skipped_on_the_device_and_counted(tmp_path):
    parts, (good, other, last) = make_parts_and_batches()
    sums = DeviceSums.for_epoch({}, torch.device("cpu"))
    sums.add(train_step(parts, good))
    weights = [p.detach().clone() for p in parts.core.parameters()]
    adam = optimizer_state(parts)

    poisoned = other._replace(mel=other.mel.clone().index_fill_(2, torch.tensor([3]), float("nan")))
    result = train_step(parts, poisoned)
    sums.add(result)
    assert float(result.skipped) == 1.0 and not torch.isfinite(result.grad_norm)
    assert all(torch.equal(a, b) for a, b in zip(weights, parts.core.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(adam, optimizer_state(parts)))  # step count too
    sums.start_copy()
    assert {k: sums.read()[k] for k in ("steps", "skipped", "bad_in_row")} == {"steps": 1, "skipped": 1, "bad_in_row": 1}
    assert torch.isfinite(sums.values[:5]).all()  # the NaN loss was not summed (the last-step slots show it)

    sums.add(train_step(parts, last))  # a good step applies, and ends the run of bad ones
    sums.start_copy()
    assert {k: sums.read()[k] for k in ("steps", "skipped", "bad_in_row")} == {"steps": 2, "skipped": 1, "bad_in_row": 0}
    assert not all(torch.equal(a, b) for a, b in zip(weights, parts.core.parameters()))
    assert optimizer_state(parts)[0].item() == 2.0


def test_resuming_an_unfused_checkpoint_keeps_the_fused_step(tmp_path):
    """Checkpoints from before the fused step store fused=None; loading one must not switch the
    fused update off (the unfused Adam refuses found_inf), and the moments carry over."""
    parts, (good, other, _) = make_parts_and_batches()
    old = torch.optim.Adam(parts.core.parameters(), lr=1e-3)
    parts.core(good.text, good.text_lengths, good.mel, good.mel_lengths).mel_postnet.sum().backward()
    old.step()
    load_optimizer_state(parts.optimizer, old.state_dict())
    assert all(group["fused"] for group in parts.optimizer.param_groups)
    assert all(torch.equal(a, b) for a, b in zip(optimizer_state(parts), [
        t for s in old.state_dict()["state"].values() for t in (s["step"], s["exp_avg"], s["exp_avg_sq"])]))
    result = train_step(parts, other)
    assert float(result.skipped) == 0.0 and optimizer_state(parts)[0].item() == 2.0
