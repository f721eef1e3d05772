"""What only a CUDA GPU can show (marker `cuda`; each test skips with the reason on a machine
without one). On a CPU-only machine they all skip; `make gpu-check` runs this file as its `tests` part
(on a GPU):

* one training step on CUDA equals the CPU step in fp32 with TF32 off, plain and fast decoder;
* a non-finite gradient skips the fused Adam step on CUDA, weights and moments bit-identical;
* bf16, and fp16 with the gradient scaler, give finite steps with gradients near fp32's;
* the steady-state training step makes no host sync (torch.cuda.set_sync_debug_mode("error")),
  eager, padded and graphed;
* the graphed decoder loop (model/graphs.py) equals the eager one within 1e-5 relative in fp32
  with TF32 off, outputs and every gradient, over 3 shapes replayed in random order, also with the
  fused Triton kernels (model.fused_attention, model.fused_lstm or the split model.split_lstm) in the graphs;
* those kernels, compiled for the GPU, against the unfused code: fp32 within 1e-5 of float64, bf16
  within 1-2 %;
* the whole model at its full sizes (B0 16, texts up to 170 symbols, 260 decoder steps), fused
  (model.fused_attention and model.fused_lstm) and split (model.fused_attention and
  model.split_lstm), against the plain loop: its fp32 outputs and
  gradients as close to float64's as the plain loop's fp32 ones (the GPU window runs these with
  `-k fused`);
* DDP over NCCL in one process (force_ddp=true), a short training run;
* the loader pins every tensor of a Batch (model/batch.py), the packing table's too;
* batch_size=auto's probe (training/auto_batch.py) on the graphed step: under a capped free memory
  it finds a B0 above 16 whose steps fit the cap; train.py probes, caches and reads its cache.
"""

import contextlib
import copy
import dataclasses
import random
import sys
from functools import partial

import pytest
import torch

import train
from model import Batch, Tacotron2, Tacotron2Config
from model.graphs import build_loop_graphs
from model.shapes import LoopShape
from tests.kit import (
    REPO,
    SMALL_MODEL,
    batch_of,
    demo_corpus,  # noqa: F401  (a fixture: scripts.release.gpu_check runs this file with --noconftest)
    make_batch,
    packed_batch,
    run_command,
    step_parts_and_batches,
    tiny,
    tiny_config,
)
from training.auto_batch import CACHE_NAME, CudaGauge, ProbeSetup, probe_b0, probe_shapes, probe_step, probe_table
from training.config import resolve_config
from training.hparams import load_hparams
from training.step import set_matmul_precision, train_step

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none is visible here)"),
]
CUDA = torch.device("cuda")
SHAPES = [
    LoopShape(rows=5, frames=24, text=16),
    LoopShape(rows=7, frames=32, text=16),
    LoopShape(rows=4, frames=48, text=32),
]
BATCHES = {
    SHAPES[0]: ([4, 7, 2], [9, 13, 20]),
    SHAPES[1]: ([4, 7, 2, 5], [9, 13, 6, 27]),
    SHAPES[2]: ([20, 3], [40, 11]),
}


@pytest.fixture(autouse=True)
def true_fp32():
    """TF32 off for matrix products and cuDNN (matmul_precision=highest), restored afterwards."""
    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    set_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(before[0])
    torch.backends.cudnn.allow_tf32 = before[1]


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm().clamp(min=1e-30))


NO_DROPOUT = (
    "model.prenet_dropout=0.0,model.p_attention_dropout=0.0,model.p_decoder_dropout=0.0,"
    "model.encoder_dropout=0.0,model.postnet_dropout=0.0"
)


def step_on(device, fast: bool):
    """One training step of the small model (the same initial weights on every device, no dropout:
    the devices' generators differ) on `device`: loss, gradients, new weights."""
    from training.config import resolve_config
    from training.hparams import load_hparams
    from training.step import build_step_parts

    _, (batch, *_) = step_parts_and_batches()
    cfg = resolve_config(load_hparams(f"dataset=demo,{SMALL_MODEL},{NO_DROPOUT},fast_decoder={fast}"))
    parts = build_step_parts(cfg.train, cfg.model, device)
    result = train_step(parts, batch.to(device))
    grads = [p.grad.detach().clone() for p in parts.core.parameters()]
    return float(result.terms.loss), grads, [p.detach().clone() for p in parts.core.parameters()]


@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast"])
def test_a_cuda_step_equals_the_cpu_step_in_fp32(fast):
    loss_cpu, grads_cpu, weights_cpu = step_on(torch.device("cpu"), fast)
    loss_gpu, grads_gpu, weights_gpu = step_on(CUDA, fast)
    assert loss_gpu == pytest.approx(loss_cpu, rel=1e-4)
    # A convolution's bias before BatchNorm has a gradient of zero in exact arithmetic: on either
    # device it is rounding noise (about 1e-8 of the whole gradient), which no relative error can
    # compare, and Adam turns that noise into an update of a random sign. Those tensors must be
    # noise on both devices; every other gradient and weight must agree.
    scale = torch.cat([g.flatten() for g in grads_cpu]).norm()
    zero = [i for i, g in enumerate(grads_cpu) if g.norm() < 1e-6 * scale]
    assert zero and all(grads_gpu[i].cpu().norm() < 1e-6 * scale for i in zero)
    compared = [i for i in range(len(grads_cpu)) if i not in zero]
    for i in compared:
        assert relative(grads_gpu[i], grads_cpu[i]) < 1e-3
        assert relative(weights_gpu[i], weights_cpu[i]) < 1e-4


def test_a_non_finite_gradient_skips_the_fused_adam_step_on_cuda():
    parts, (good, bad, _) = step_parts_and_batches()
    parts.core.to(CUDA)
    parts = dataclasses.replace(parts, optimizer=torch.optim.Adam(parts.core.parameters(), lr=1e-3, fused=True))
    train_step(parts, good.to(CUDA))
    weights = [p.detach().clone() for p in parts.core.parameters()]
    moments = [t.clone() for s in parts.optimizer.state.values() for t in s.values()]
    poisoned = bad.to(CUDA)
    poisoned = dataclasses.replace(
        poisoned, mel=poisoned.mel.index_fill(2, torch.tensor([3], device=CUDA), float("nan"))
    )
    result = train_step(parts, poisoned)
    assert float(result.skipped) == 1.0
    assert all(torch.equal(a, b) for a, b in zip(weights, parts.core.parameters()))
    assert all(
        torch.equal(a, b) for a, b in zip(moments, [t for s in parts.optimizer.state.values() for t in s.values()])
    )


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_mixed_precision_steps_are_finite_and_near_fp32(amp):
    from training.step import AMP_DTYPES

    # no dropout: on CUDA the masks drawn for bf16 or fp16 tensors differ from fp32's under one seed
    parts, (batch, *_) = step_parts_and_batches(extra=NO_DROPOUT)
    parts.core.to(CUDA)
    on = batch.to(CUDA)
    torch.manual_seed(0)  # lr 0: both steps see the same weights
    fp32 = train_step(
        dataclasses.replace(parts, optimizer=torch.optim.Adam(parts.core.parameters(), lr=0.0, fused=True)), on
    )
    want = [p.grad.clone() for p in parts.core.parameters()]
    parts.core.zero_grad(set_to_none=True)
    scaler = torch.amp.GradScaler("cuda", enabled=amp == "fp16")
    mixed = dataclasses.replace(
        parts,
        amp_dtype=AMP_DTYPES[amp],
        scaler=scaler,
        optimizer=torch.optim.Adam(parts.core.parameters(), lr=0.0, fused=True),
    )
    torch.manual_seed(0)
    result = train_step(mixed, on)
    assert torch.isfinite(result.terms.loss) and float(result.bad) == 0.0
    assert float(fp32.terms.loss) == pytest.approx(float(result.terms.loss), rel=0.05)
    if float(result.skipped) == 0.0:  # fp16 may skip its first step (scale 65536): not a bad step
        got = [p.grad for p in parts.core.parameters()]  # train_step unscaled them
        total = relative(torch.cat([g.flatten() for g in got]), torch.cat([g.flatten() for g in want]))
        assert total < 0.05


@pytest.mark.parametrize(
    "variant",
    [
        "graph_bucket=0",
        "graph_bucket=16",
        "graph_bucket=16,cuda_graphs=true",
        "graph_bucket=16,cuda_graphs=true,model.fused_attention=true,model.fused_lstm=true",
    ],
)
def test_the_steady_state_step_makes_no_host_sync(tmp_path, variant, demo_corpus):
    """Two warm-up steps, then three under set_sync_debug_mode('error'): any synchronising call
    (a host read, a nonzero, an item) raises."""
    from training.config import resolve_config
    from training.hparams import load_hparams
    from training.loop import device_batches
    from training.run import build_run

    cfg = resolve_config(load_hparams(tiny(tmp_path, f"device=cuda,fast_decoder=true,{variant}", demo_corpus)))
    run = build_run(cfg, {}, None)
    from training.step import learning_rate, loop_shape

    batches = list(device_batches(run.loaders.train_loader, run.device))[:5]
    for k, batch in enumerate(batches):
        lr = learning_rate(cfg.train, cfg.batching.batch_size, k, len(batch.text_lengths_host))
        shape = loop_shape(run.shapes, batch)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error" if k >= 2 else "default")
        try:
            train_step(run.parts, batch, lr, shape)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


#: The graphed loop's kernels: none, the fused step, the fused attention with the split LSTM cells.
GRAPHED_KERNELS = {
    "unfused": {},
    "fused": {"fused_attention": True, "fused_lstm": True},
    "split": {"fused_attention": True, "split_lstm": True},
}


@pytest.mark.parametrize("kernels", list(GRAPHED_KERNELS))
def test_the_graphed_loop_equals_the_eager_loop_over_shapes_in_random_order(kernels):
    """fp32, TF32 off: outputs and every parameter gradient within 1e-5 relative, 3 shapes, each
    replayed twice in a random order; the graphs really were captured. Fused and split: the graphed
    loop runs the Triton kernels (model.fused_attention with model.fused_lstm or model.split_lstm),
    the eager one the unfused loop."""
    cfg = tiny_config(n_frames_per_step=2, fast_decoder=True)
    eager = Tacotron2(cfg).to(CUDA).train()
    graphed = Tacotron2(dataclasses.replace(cfg, **GRAPHED_KERNELS[kernels])).to(CUDA).train()
    graphed.load_state_dict(eager.state_dict())
    graphs = build_loop_graphs(graphed.decoder, SHAPES, CUDA)
    assert graphs.captured
    order = [shape for shape in SHAPES for _ in range(2)]
    random.Random(0).shuffle(order)
    for k, shape in enumerate(order):
        batch = make_batch(*BATCHES[shape], 2, seed=k).to(CUDA)  # the CPU text lengths stay on the CPU
        outs, grads = [], []
        for model, g in ((eager, None), (graphed, graphs)):
            model.zero_grad(set_to_none=True)
            torch.manual_seed(k)
            with model.decoder.loop_hook(g.runner) if g else contextlib.nullcontext():
                out = model(batch, shape=shape)
            gen = torch.Generator(device=CUDA).manual_seed(3)
            sum((o * torch.randn(o.shape, generator=gen, device=CUDA)).sum() for o in out).backward()
            outs.append([o.detach().clone() for o in out])
            grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        for a, b in zip(*outs):
            assert relative(a, b) < 1e-5, shape
        for name, grad in grads[0].items():
            assert relative(grads[1][name], grad) < 1e-5, (shape, name)


def test_ddp_over_nccl_in_one_process(tmp_path, demo_corpus):
    hp = tiny(tmp_path, "epochs=1,device=cuda,force_ddp=true", demo_corpus)
    result = run_command(sys.executable, REPO / "train.py", "--hparams", hp, timeout=600)
    assert "parameters identical on all 1 ranks" in result.stdout


def test_the_loader_pins_every_tensor_of_a_batch():
    """DataLoader(pin_memory=True) calls Batch.pin_memory, so the copy to the device can be non-blocking."""
    from torch.utils.data import DataLoader

    from model import Batch

    _, batch = packed_batch([(0, 2, 3), (0, 1, 2), (1, 3, 4)], 1, seed=0, extra_frames=0)
    pinned = next(iter(DataLoader([batch], batch_size=None, pin_memory=True)))
    assert isinstance(pinned, Batch) and pinned.frames == batch.frames
    tensors = [
        pinned.text,
        pinned.text_lengths,
        pinned.mel,
        pinned.gate,
        pinned.mel_lengths,
        pinned.text_lengths_host,
        pinned.packing.row,
        pinned.packing.start,
        pinned.packing.text_start,
    ]
    assert all(t.is_pinned() for t in tensors)


@dataclasses.dataclass(frozen=True)
class CappedGauge(CudaGauge):
    """The GPU's gauge with at most `cap` bytes free: a small GPU, so that the search stops early."""

    cap: int = 0

    def free(self) -> int:
        return min(super().free(), self.cap)


def capped_setup(cap: int) -> ProbeSetup:
    """The micro model's graphed step on 300 generated lengths, at most `cap` bytes free."""
    cfg = resolve_config(
        load_hparams(f"{SMALL_MODEL},n_frames_per_step=2,fast_decoder=true,graph_bucket=16,batch_size=auto,lrf=0.1")
    )
    frames = torch.randint(20, 120, (300,), generator=torch.Generator().manual_seed(0)).numpy()
    return ProbeSetup(
        cfg.train, cfg.model, cfg.batching, frames, frames // 3 + 5, CUDA, CappedGauge(CUDA, cap), log=print
    )


def test_the_probe_finds_a_b0_whose_graphed_steps_fit_a_capped_gpu():
    free = capped_setup(2**40)
    at_16 = max(free.gauge.peak(partial(probe_step, free, shape)) for shape in probe_shapes(probe_table(free, 16)))
    capped = capped_setup(int(4 * at_16))
    b0 = probe_b0(capped)
    assert b0 > 16
    used = max(capped.gauge.peak(partial(probe_step, capped, shape)) for shape in probe_shapes(probe_table(capped, b0)))
    assert used <= 0.9 * capped.gauge.cap


def test_train_probes_caches_and_then_reads_its_batch_size(tmp_path, capsys, demo_corpus):
    hp = tiny(
        tmp_path, f"device=cuda,batch_size=auto,stop_after_steps=1,mel_cache_dir={tmp_path / 'mels'}", demo_corpus
    )
    for found, run in (("probed in", "a"), ("cached in", "b")):
        assert train.main(["--hparams", f"{hp},output_dir={tmp_path / run}"]) == 0
        out = capsys.readouterr().out
        assert "batch_size=auto: B0 = " in out and found in out, out
    assert (tmp_path / "mels" / CACHE_NAME).is_file()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-inputs"])
def test_the_fused_attention_kernels_on_cuda(dtype):
    """model/ops/attention_step.py compiled for the GPU (no interpreter): outputs and every gradient
    against the plain chain in float64 on the same device, over one chunk and several."""
    from tests.test_model_ops_attention_step import SIZES, fused, inputs, outputs_and_grads, plain

    for *size, chunk in SIZES:
        layer, tensors = inputs(*size)
        layer = layer.to(CUDA)
        tensors = [t.detach().to(CUDA).requires_grad_(t.requires_grad) for t in tensors]
        want, want_grads = outputs_and_grads(plain, layer, tensors)
        low = copy.deepcopy(layer).float()
        # autocast's dtypes: a bf16 query layer (its precomputed term, and so its weight and row),
        # memory and processed memory (positions 1-3), float32 state
        kinds = [dtype if k in (1, 2, 3) else torch.float32 for k in range(len(tensors))]
        cast = [t.detach().to(kind).requires_grad_(t.requires_grad) for t, kind in zip(tensors, kinds)]
        got, got_grads = outputs_and_grads(fused, low, cast, chunk)
        bound = 1e-5 if dtype == torch.float32 else 1e-2
        for a, b in (*zip(got, want), *zip(got_grads, want_grads)):
            assert relative(a, b) < bound, (size, dtype)


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16-weights"])
@pytest.mark.parametrize("design", ["fused", "split"])
def test_the_lstm_kernels_on_cuda(design, bf16):
    """model/ops/lstm_cell.py (fused) and lstm_split.py (split) compiled for the GPU: outputs, the row
    written and every gradient against the unfused cell in float64 on the same device (bf16: against
    float32 products of the same weights; the split cell's GEMM then takes a bf16 precomputed term, as
    under autocast)."""
    from tests.test_model_ops_lstm_cell import CASES, cell_inputs, fused, run, unfused
    from tests.test_model_ops_lstm_split import split

    cell_step = {"fused": fused, "split": split}[design]
    for case in CASES:
        pre, weight, parts, cell, keep = cell_inputs(*case)
        pre, cell, *parts = (t.detach().to(CUDA).requires_grad_() for t in (pre, cell, *parts))
        weight, keep = weight.to(CUDA), None if keep is None else keep.to(CUDA)
        if bf16:
            weight = weight.bfloat16()
        want, _, want_grads = run(unfused, pre, weight.double(), parts, cell, keep, torch.float64)
        low = [t.detach().float().requires_grad_() for t in (pre, cell, *parts)]
        keep = None if keep is None else keep.float()
        compute = weight if bf16 else weight.float()
        low_pre = low[0].to(compute.dtype) if design == "split" else low[0]  # the gradient reaches low[0]
        got, _, got_grads = run(cell_step, low_pre, compute, low[2:], low[1], keep, compute.dtype)
        for a, b in (*zip(got, want), *zip(got_grads, want_grads)):
            assert relative(a, b) < (2e-2 if bf16 else 1e-5), (design, case, bf16)


#: B0 16 at the full model's sizes: LJSpeech-like texts (symbols) and mel frames (one decoder step each)
FULL_TEXT = [170, 151, 139, 128, 120, 113, 104, 97, 90, 82, 75, 66, 58, 51, 44, 40]
FULL_FRAMES = [260, 231, 250, 204, 219, 188, 176, 199, 160, 151, 170, 131, 120, 142, 101, 96]
#: The fast designs of the decoder step against the plain loop, by the model switches they turn on
FULL_DESIGNS = {
    "fused": {"fused_attention": True, "fused_lstm": True},
    "split": {"fused_attention": True, "split_lstm": True},
}


def full_batch() -> Batch:
    g = torch.Generator().manual_seed(0)
    text = torch.randint(1, 60, (len(FULL_TEXT), max(FULL_TEXT)), generator=g)
    text_lengths = torch.tensor(FULL_TEXT)
    text[torch.arange(text.size(1)) >= text_lengths[:, None]] = 0
    mel_lengths = torch.tensor(FULL_FRAMES)
    mel = torch.randn(len(FULL_FRAMES), 80, max(FULL_FRAMES), generator=g)
    mel = mel * (torch.arange(mel.size(2)) < mel_lengths[:, None]).unsqueeze(1)
    return batch_of(text, text_lengths, mel, mel_lengths)


def full_pass(dtype: torch.dtype, **switches) -> list[torch.Tensor]:
    """The full model (fast loop, no dropout: float64's masks would differ) in train mode on CUDA:
    its outputs, then the gradient of a random projection of them for every parameter, in float64."""
    dropout = dict.fromkeys(("encoder_dropout", "p_attention_dropout", "p_decoder_dropout", "prenet_dropout"), 0.0)
    torch.manual_seed(0)
    model = Tacotron2(Tacotron2Config(n_symbols=60, fast_decoder=True, postnet_dropout=0.0, **dropout, **switches))
    model = model.to(CUDA, dtype).train()
    batch = full_batch().to(CUDA)
    batch = dataclasses.replace(batch, mel=batch.mel.to(dtype), gate=batch.gate.to(dtype))
    out = model(batch)
    gen = torch.Generator(device=CUDA).manual_seed(3)
    # the same draws in either dtype: drawn in float64, then rounded
    sum(
        (o * torch.randn(o.shape, generator=gen, device=CUDA, dtype=torch.float64).to(dtype)).sum() for o in out
    ).backward()
    return [t.detach().double() for t in (*out, *(p.grad for p in model.parameters()))]


@pytest.mark.parametrize("design", list(FULL_DESIGNS))
def test_the_fused_designs_at_the_full_models_sizes_are_as_close_to_float64_as_the_plain_loop(design):
    """Outputs and every gradient of the full model at B0 16 (fp32, TF32 off), each within ten times the
    plain fp32 loop's error against the plain loop in float64 (or 1e-5): the kernels at the sizes they
    are for, the fused attention's text walk over several chunks among them."""
    switches = FULL_DESIGNS[design]
    reference = full_pass(torch.float64)
    plain = full_pass(torch.float32)
    fast = full_pass(torch.float32, **switches)
    # a convolution's bias before BatchNorm has a zero gradient in exact arithmetic: noise on either side
    scale = max(float(t.norm()) for t in reference)
    for k, (want, base, got) in enumerate(zip(reference, plain, fast)):
        if float(want.norm()) < 1e-6 * scale:
            assert float(got.norm()) < 1e-6 * scale, (design, k)
        else:
            assert relative(got, want) <= max(10 * relative(base, want), 1e-5), (design, k)
