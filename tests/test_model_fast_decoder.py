"""model/fast_decoder.py against the reference decoder: the same outputs and parameter gradients in
float64 (r = 1 and 2, padded and BLoad-packed batches, train mode with dropout; also with the
attention's energy chain recomputed in the backward, in either loop, and with the fast loop's
attention and LSTM cells as the fused Triton kernels, run by Triton's interpreter on the CPU), each gradient
written once per backward (gradient accumulation, DDP hooks), and under bf16 autocast the LSTM
weight gradients stay within 1 % of fp32 where the reference's per-step bf16 sums drift."""

import dataclasses
import statistics

import pytest
import torch

from model import Batch, Tacotron2, Tacotron2Config
from model.config import ModelConfigError
from model.decoder import Decoder
from model.fast_decoder import FastDecoder
from model.fast_steps import FusedAttention, FusedCell, PlainAttention, PlainCell
from tests.kit import N_SYMBOLS, float64_pass, make_batch, packed_batch, relative_error, tiny_config
from training.op_count import count_ops

# (row, text length, mel length) of a packed batch: odd lengths, an utterance of one frame
BLOCKS = [(0, 4, 7), (0, 2, 1), (0, 3, 6), (1, 6, 11), (1, 5, 5), (2, 3, 9)]
LSTM_WEIGHTS = ["attention_rnn.weight_ih", "attention_rnn.weight_hh", "decoder_rnn.weight_ih", "decoder_rnn.weight_hh"]


def packed_inputs(r: int, seed: int = 2) -> Batch:
    """A packed Batch of BLOCKS, utterances back to back from frame 0, two padding steps at the end."""
    return packed_batch(BLOCKS, r, seed, extra_frames=2)[1]


def padded_inputs(r: int) -> Batch:
    return make_batch([4, 7, 2, 5], [9, 13, 6, 10], r)


#: The loops compared with the plain one: the fast loop, and each loop recomputing the attention's
#: energy chain in the backward (Tacotron2Config.recompute_attention).
VARIANTS = {
    "fast": {"fast_decoder": True},
    "fast+recompute": {"fast_decoder": True, "recompute_attention": True},
    "plain+recompute": {"recompute_attention": True},
    "fast+fused": {"fast_decoder": True, "fused_attention": True, "fused_lstm": True},
}
#: Each fused part on its own, for the operation counts (their numerics: "fast+fused" above, both at once).
FUSED_PARTS = {
    "fast+fused_attention": {"fast_decoder": True, "fused_attention": True},
    "fast+fused_lstm": {"fast_decoder": True, "fused_lstm": True},
}


#: Every variant at r 1 and 2, padded and packed; the fused kernels (slow in Triton's interpreter) at r 2.
CASES = [
    pytest.param(r, packed, variant, id=f"{r}-{'packed' if packed else 'padded'}-{variant}")
    for variant in VARIANTS
    for r in ([2] if variant == "fast+fused" else [1, 2])
    for packed in (False, True)
]


@pytest.mark.parametrize("r, packed, variant", CASES)
def test_fast_decoder_equals_the_reference_in_float64(r, packed, variant):
    assert_equals_the_reference_in_float64(VARIANTS[variant], r, packed, variant)


def assert_equals_the_reference_in_float64(overrides: dict, r: int, packed: bool, label: str) -> None:
    """The tiny model with `overrides` against the plain loop: outputs and every parameter's gradient
    in float64 (1e-12), r frames a step, a packed or padded batch; prints the worst relative error."""
    cfg = tiny_config(n_frames_per_step=r)
    torch.manual_seed(0)
    state = Tacotron2(cfg).double().state_dict()
    inputs = packed_inputs(r) if packed else padded_inputs(r)
    ref_out, ref_grads = float64_pass(cfg, state, inputs)
    out, grads = float64_pass(dataclasses.replace(cfg, **overrides), state, inputs)
    assert ref_grads.keys() == grads.keys()
    errors = {}
    for name, want, got in zip(ref_out._fields, ref_out, out):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=name)
        errors[name] = relative_error(got, want)
    for name, want in ref_grads.items():
        assert want is not None and grads[name] is not None, name
        torch.testing.assert_close(grads[name], want, rtol=1e-12, atol=1e-12, msg=name)
        errors[name] = relative_error(grads[name], want)
    worst = max(errors, key=errors.get)
    print(f"{label} r={r} {'packed' if packed else 'padded'}: max relative error {errors[worst]:.1e} ({worst})")


def test_fast_decoder_in_eval_without_grad_equals_the_reference():
    cfg = tiny_config(n_frames_per_step=2)
    torch.manual_seed(0)
    ref = Tacotron2(cfg).eval()
    fast = Tacotron2(dataclasses.replace(cfg, fast_decoder=True)).eval()
    fast.load_state_dict(ref.state_dict())  # same parameters: checkpoints load either way
    batch = packed_inputs(2)
    with torch.no_grad():
        torch.manual_seed(1)
        want = ref(batch)
        torch.manual_seed(1)
        got = fast(batch)
    for name, a, b in zip(want._fields, got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)


def scalar_loss(out) -> torch.Tensor:
    return out.mel.pow(2).sum() + out.mel_postnet.pow(2).sum() + out.gate.sum()


class CallCount:
    """A post-accumulate-grad hook that counts its calls."""

    def __init__(self):
        self.n = 0

    def __call__(self, _param: torch.Tensor) -> None:
        self.n += 1


def test_each_weight_gradient_is_written_once_and_accumulates():
    """One AccumulateGrad per parameter and backward (what DDP's hooks see); a second backward adds."""
    cfg = tiny_config(
        fast_decoder=True,
        n_frames_per_step=1,
        **{
            k: 0.0
            for k in (
                "encoder_dropout",
                "prenet_dropout",
                "p_attention_dropout",
                "p_decoder_dropout",
                "postnet_dropout",
            )
        },
    )
    torch.manual_seed(0)
    model = Tacotron2(cfg).train()
    calls = {name: CallCount() for name, _ in model.named_parameters()}
    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(calls[name])
    batch = padded_inputs(1)
    scalar_loss(model(batch)).backward()
    once = {name: p.grad.clone() for name, p in model.named_parameters()}
    scalar_loss(model(batch)).backward()
    assert {c.n for c in calls.values()} == {2}, {k: c.n for k, c in calls.items() if c.n != 2}
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, 2 * once[name], msg=name)


def test_the_switches_pick_each_step_once_and_leave_the_checkpoint_names_alone():
    """FastDecoder.__init__ picks the attention step and both LSTM cells from the fused switches
    (model/fast_steps.py); the picks hold no parameters, so every variant's state dict (a
    checkpoint) has the plain model's names."""
    names = sorted(Tacotron2(tiny_config()).state_dict())
    for variant, overrides in {**VARIANTS, **FUSED_PARTS}.items():
        model = Tacotron2(tiny_config(**overrides))
        assert sorted(model.state_dict()) == names, variant
        if overrides.get("fast_decoder"):
            cell = FusedCell if overrides.get("fused_lstm") else PlainCell
            attention = FusedAttention if overrides.get("fused_attention") else PlainAttention
            steps = (model.decoder.attention_step, model.decoder.attention_rnn_step, model.decoder.decoder_rnn_step)
            assert tuple(map(type, steps)) == (attention, cell, cell), variant


def test_fast_decoder_must_be_a_bool():
    with pytest.raises(ModelConfigError, match="fast_decoder must be a bool"):
        tiny_config(fast_decoder=1)


BF16_STEPS = 400


def decoder_lstm_grads(decoder: Decoder, memory, mel, bf16: bool, cache: bool = True) -> dict:
    """LSTM weight gradients of one teacher-forced pass, under bf16 autocast (with or without its
    cast cache) or in fp32."""
    decoder.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16, cache_enabled=cache):
        out, gate, _ = decoder(memory, torch.zeros(memory.shape[:2]), mel)
        loss = (out.float() - mel).pow(2).mean() + gate.float().mean()
    loss.backward()
    params = dict(decoder.named_parameters())
    return {name: params[name].grad for name in LSTM_WEIGHTS}


def test_bf16_autocast_weight_gradients_stay_within_one_percent_of_fp32():
    """400 steps under bf16 autocast: the fast path's LSTM weight gradients are one fp32 GEMM over
    all steps; the reference sums 400 per-step gradients of the cached bf16 weights in bf16, unless
    the cast cache is off (as training/step.forward_loss runs it), when each step's cast sends its
    gradient back to fp32 before the sum. Measured (torch 2.13 CPU): fast 0.3-0.4 %, reference
    7-12 % with the cache, about as good as fast without it."""
    cfg = Tacotron2Config(
        n_symbols=N_SYMBOLS,
        encoder_embedding_dim=32,
        n_mel_channels=16,
        attention_rnn_dim=128,
        decoder_rnn_dim=128,
        prenet_dim=32,
        attention_dim=32,
        attention_location_n_filters=8,
        attention_location_kernel_size=15,
        prenet_dropout=0.0,
        p_attention_dropout=0.0,
        p_decoder_dropout=0.0,
    )
    torch.manual_seed(0)
    ref = Decoder(cfg).train()
    fast = FastDecoder(cfg).train()
    fast.load_state_dict(ref.state_dict())
    g = torch.Generator().manual_seed(1)
    memory = torch.randn(4, 60, 32, generator=g)
    mel = torch.sin(0.05 * torch.arange(BF16_STEPS) + 6 * torch.rand(4, 16, 1, generator=g))
    want = decoder_lstm_grads(ref, memory, mel, bf16=False)
    plain_bf16 = decoder_lstm_grads(ref, memory, mel, bf16=True)
    uncached = decoder_lstm_grads(ref, memory, mel, bf16=True, cache=False)
    got = decoder_lstm_grads(fast, memory, mel, bf16=True)
    for name in LSTM_WEIGHTS:
        error = float((got[name] - want[name]).norm() / want[name].norm())
        plain_error = float((plain_bf16[name] - want[name]).norm() / want[name].norm())
        uncached_error = float((uncached[name] - want[name]).norm() / want[name].norm())
        print(
            f"{name}: fast {100 * error:.2f} %, reference {100 * plain_error:.2f} %, "
            f"reference without the cast cache {100 * uncached_error:.2f} %"
        )
        assert error < 0.01 and uncached_error < 0.01, name


#: ATen compute operations per decoder step (forward, backward) of each loop on the CPU: an eager
#: GPU step launches about one kernel per operation. On CUDA the fast loop's two LSTM cell updates
#: are one fused kernel each forward and backward, about 16 and 24 fewer (docs/results.md, "Ops per
#: decoder step"). The fused kernels (model.fused_attention, model.fused_lstm) are one operation each,
#: on the CPU as on CUDA, so with both the count is the GPU's launches: 8. A change that moves these
#: must update them here, on purpose.
OPS_PER_STEP = {
    "plain": (41, 75),
    "fast": (41, 53),
    "fast+recompute": (41, 62),
    "plain+recompute": (41, 84),
    "fast+fused_attention": (28, 34),
    "fast+fused_lstm": (16, 24),
    "fast+fused": (3, 5),
    "fast+bf16": (43, 66),  # under CPU bf16 autocast: 15 dtype casts more (docs/results.md)
    "fast+fused+bf16": (3, 5),  # no cast: the kernels read and write each operand in its own dtype
}


def ops_per_step(decoder: Decoder, steps: tuple[int, int] = (2, 3), bf16: bool = False) -> tuple[float, float]:
    """The compute operations of every further decoder step, forward and backward (a train-mode loop
    over random memory and mels, under CPU bf16 autocast if asked; the per-batch work cancels out in
    the difference)."""
    counts = []
    for n in steps:
        # Fresh gradients each time: a second backward would add into .grad, per batch, not per step.
        decoder.zero_grad(set_to_none=True)
        # Not a leaf, as the encoder's output is: autocast caches the casts of leaves only.
        memory = torch.randn(3, 7, decoder.attention.memory_layer.in_features, requires_grad=True).clone()
        mel = torch.randn(3, decoder.n_mels, n * decoder.r)
        torch.manual_seed(0)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out, forward = count_ops(decoder, memory, torch.zeros(3, 7), mel)
        _, backward = count_ops(sum(o.float().sum() for o in out).backward)
        counts.append((forward.compute, backward.compute))
    return tuple((long - short) / (steps[1] - steps[0]) for short, long in zip(*counts))


@pytest.mark.parametrize("variant", list(OPS_PER_STEP))
def test_the_operations_per_decoder_step_are_counted(variant):
    overrides = {"plain": {}, **VARIANTS, **FUSED_PARTS}[variant.removesuffix("+bf16")]
    torch.manual_seed(0)
    cfg = tiny_config(**overrides)
    decoder = (FastDecoder if cfg.fast_decoder else Decoder)(cfg).train()
    assert ops_per_step(decoder, bf16=variant.endswith("+bf16")) == OPS_PER_STEP[variant]


def bf16_pass(decoder: Decoder, memory: torch.Tensor, mel: torch.Tensor, bf16: bool) -> list[torch.Tensor]:
    """Outputs and the gradients of memory and every parameter of one teacher-forced pass (a random
    linear loss of the mel and gate outputs: the alignments, as in training without guided attention,
    send no gradient), under CPU bf16 autocast or in float32, with the same dropout draws."""
    memory = memory.clone().requires_grad_()
    torch.manual_seed(2)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = decoder(memory, torch.zeros(memory.shape[:2]), mel)
    seed = torch.Generator().manual_seed(3)
    loss = sum((o.float() * torch.randn(o.shape, generator=seed)).sum() for o in out[:2])
    return [o.float() for o in out] + [g.float() for g in torch.autograd.grad(loss, [memory, *decoder.parameters()])]


def test_the_fused_step_under_bf16_autocast_is_as_close_to_float32_as_the_unfused_one():
    """Both fused kernels under CPU bf16 autocast (bf16 weights, rows, memory and processed memory;
    float32 state, sums and weight gradients) and the unfused fast loop under the same autocast,
    each against the plain loop in float32: outputs and every gradient, memory's included, over 8
    steps. The fused step may be no further off than the unfused one: in the median over the tensors,
    and each tensor within 1.5x or 1 % (bf16 rounding moves single tensors either way)."""
    assert_bf16_as_close_as_the_unfused_loop(VARIANTS["fast+fused"])


def assert_bf16_as_close_as_the_unfused_loop(overrides: dict) -> None:
    """The decoder with `overrides` and the unfused fast loop under CPU bf16 autocast, against the plain
    loop in float32, as the test above says."""
    cfg = tiny_config(n_frames_per_step=2)
    torch.manual_seed(0)
    plain = Decoder(cfg).train()
    fast, fused = (FastDecoder(dataclasses.replace(cfg, **o)).train() for o in (VARIANTS["fast"], overrides))
    fast.load_state_dict(plain.state_dict())
    fused.load_state_dict(plain.state_dict())
    g = torch.Generator().manual_seed(1)
    memory = torch.randn(3, 9, cfg.encoder_embedding_dim, generator=g)
    mel = torch.sin(0.1 * torch.arange(16) + 6 * torch.rand(3, cfg.n_mel_channels, 1, generator=g))
    want = bf16_pass(plain, memory, mel, bf16=False)
    unfused, got = (bf16_pass(d, memory, mel, bf16=True) for d in (fast, fused))
    errors = [(relative_error(a, w), relative_error(b, w)) for a, b, w in zip(got, unfused, want)]
    for k, (error, unfused_error) in enumerate(errors):
        assert error <= max(1.5 * unfused_error, 0.01), (k, error, unfused_error)
    assert statistics.median(e for e, _ in errors) <= statistics.median(u for _, u in errors)


@pytest.mark.parametrize("variant", ["fast", "fast+fused"])
def test_output_gradients_in_any_layout_reach_every_gradient_in_float64(variant):
    """A loss may send the loop's outputs gradients in any layout: here each output is read through a
    transpose, so its gradient's last dimension is not unit-stride. The fused kernels read the
    stacked outputs' gradients along unit-stride columns (model/ops/deferred._Stacked hands them on
    so); memory's and every parameter's gradient still equal the plain loop's in float64. (Through
    Tacotron2 the masking before the loss makes them contiguous, so only the decoder shows it.)"""
    assert_any_layout_reaches_every_gradient(VARIANTS[variant])


def assert_any_layout_reaches_every_gradient(overrides: dict) -> None:
    """The decoder with `overrides` against the plain one, each output's gradient sent through a
    transpose: memory's and every parameter's gradient equal in float64."""
    cfg = tiny_config(n_frames_per_step=2)
    torch.manual_seed(0)
    plain = Decoder(cfg).double().train()
    fast = FastDecoder(dataclasses.replace(cfg, **overrides)).double().train()
    fast.load_state_dict(plain.state_dict())
    g = torch.Generator().manual_seed(1)
    memory = torch.randn(3, 9, cfg.encoder_embedding_dim, generator=g, dtype=torch.float64)
    mel = torch.randn(3, cfg.n_mel_channels, 12, generator=g, dtype=torch.float64)
    grads = []
    for decoder in (plain, fast):
        leaf = memory.clone().requires_grad_()
        torch.manual_seed(7)  # the same dropout masks
        outputs = decoder(leaf, torch.zeros(memory.shape[:2], dtype=torch.float64), mel)
        seed = torch.Generator().manual_seed(2)
        loss = sum(
            (o.transpose(-1, -2) * torch.randn(o.transpose(-1, -2).shape, generator=seed)).sum() for o in outputs
        )
        grads.append(torch.autograd.grad(loss, [leaf, *decoder.parameters()]))
    for k, (got, want) in enumerate(zip(grads[1], grads[0])):
        assert relative_error(got, want) < 1e-12, k
