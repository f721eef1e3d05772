"""CUDA graphs for the fast decoder loop: one captured forward and one captured backward per shape.

Why. An eager decoder step launches about a hundred small kernels (forward and backward), and at
B0 = 16 the GPU finishes each one before the host has queued the next: the host sets the pace. A
CUDA graph replays a whole loop, every step's kernels, with one launch.

How. A graph replays fixed shapes at fixed addresses, so each LoopShape (model/shapes.py) gets its
own static buffers: the loop's inputs (memory, mask bias, prenet outputs, processed memory,
location matrix, both dropout masks), its outputs, the gradients of its outputs, and the
gradients of its inputs and parameters. A batch is zero-padded to its shape
(model/fast_decoder.pad_to_shape) and copied into the input buffers; the forward graph replays;
the outputs are read from the output buffers. In backward the output gradients are copied in, the
backward graph replays, and the input and parameter gradients it wrote go back to autograd
(_Replay), which accumulates them into .grad as usual, so DDP's hooks fire as usual. The decoder
reaches them through its loop hook (FastDecoder.loop_hook with LoopGraphs.runner), which the
training step sets: the model does not import this module. The dropout
masks are drawn outside the graph (Decoder.teacher_forcing) and are inputs: the graph holds no
random state. Parameters are read in place, so the optimiser's in-place updates reach the next
replay.

Memory. All shapes share one memory pool, captured largest first, each forward followed at once
by its backward: a shape's activations live only from its forward to its backward, which is also
how training runs them (forward, loss and backward of one batch; two shapes never interleave), so
the next capture reuses them. What stays per shape is its static buffers (`loop_memory`).

Off CUDA (capture=False) the same buffers, copies, autograd node and slicing run the loop eagerly
on the static buffers: the path the CPU tests check against the plain decoder in float64. The
capture itself needs a GPU.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch.autograd.function import once_differentiable

from .decoder import TeacherForcing
from .fast_decoder import FastDecoder, LoopRunner
from .shapes import LoopShape

#: The loop's inputs, in the order of the static buffers, and which of them carry a gradient.
INPUTS = ("memory", "mask_bias", "prenet_out", "processed_memory", "location_matrix", "attention_keep", "decoder_keep")
NEEDS_GRAD = (True, False, True, True, True, False, False)
#: Eager runs of each shape before its capture (on a side stream, as PyTorch's own helper does):
#: lazy initialisation (cuBLAS workspaces, autograd's) must not happen inside a capture.
WARMUP_RUNS = 3


class StaticLoop:
    """One shape's static buffers and its loop: two CUDA graphs (forward, backward) when
    captured, an eager run on the same buffers otherwise."""

    def __init__(
        self, decoder: FastDecoder, shape: LoopShape, like: TeacherForcing, capture: bool = False, pool=None
    ) -> None:
        self.decoder, self.shape = decoder, shape
        self.inputs = static_inputs(shape, decoder, like)
        self.params = tuple(decoder.loop_parameters())
        self.outputs: tuple[torch.Tensor, ...] | None = None
        self.grads: tuple[torch.Tensor | None, ...] | None = None
        self.grad_outputs: tuple[torch.Tensor, ...] = ()
        self.graphs: tuple[torch.cuda.CUDAGraph, torch.cuda.CUDAGraph] | None = None
        if capture:
            self._capture(pool)

    def _loop(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        memory, mask_bias, prenet_out, processed_memory, location_matrix, a_keep, d_keep = self.inputs
        tf = TeacherForcing(
            prenet_out, processed_memory, location_matrix, list(a_keep.unbind(0)), list(d_keep.unbind(0))
        )
        return self.decoder.loop(memory, mask_bias, tf)

    def _targets(self) -> list[torch.Tensor]:
        return [x for x, grad in zip(self.inputs, NEEDS_GRAD) if grad] + list(self.params)

    def _capture(self, pool) -> None:
        """Warm up on a side stream, then capture the forward and, at once, its backward."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_RUNS):
                out = self._loop()
                torch.autograd.grad(out, self._targets(), [torch.zeros_like(o) for o in out], allow_unused=True)
        torch.cuda.current_stream().wait_stream(side)
        forward, backward = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(forward, pool=pool):
            self.outputs = self._loop()
        self.grad_outputs = tuple(torch.zeros_like(o) for o in self.outputs)
        with torch.cuda.graph(backward, pool=pool):
            self.grads = torch.autograd.grad(self.outputs, self._targets(), self.grad_outputs, allow_unused=True)
        self.graphs = (forward, backward)

    def run(
        self, memory: torch.Tensor, mask_bias: torch.Tensor, tf: TeacherForcing
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The loop on a batch already padded to this shape; differentiable like the eager loop
        (the gradients of the loop's parameters, self.params, included)."""
        keeps = [
            self._keep(masks, buffer)
            for masks, buffer in ((tf.attention_keep, self.inputs[5]), (tf.decoder_keep, self.inputs[6]))
        ]
        return _Replay.apply(
            self, memory, mask_bias, tf.prenet_out, tf.processed_memory, tf.location_matrix, *keeps, *self.params
        )

    @staticmethod
    def _keep(masks: list[torch.Tensor | None], buffer: torch.Tensor) -> torch.Tensor:
        """The step-stacked dropout masks, stacked straight into the shape's buffer (forward_static
        then copies nothing); no dropout (eval, p = 0) keeps everything: ones."""
        if masks[0] is None:
            return buffer.detach().fill_(1.0)
        return torch.stack(masks, out=buffer.detach())

    def forward_static(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        for buffer, value in zip(self.inputs, tensors):
            if buffer.data_ptr() != value.data_ptr():
                buffer.detach().copy_(value)
        if self.graphs is None:
            with torch.enable_grad():
                self.outputs = self._loop()
        else:
            self.graphs[0].replay()
        return tuple(o.detach() for o in self.outputs)

    def backward_static(self, grads: Sequence[torch.Tensor]) -> tuple[torch.Tensor | None, ...]:
        """The gradients of every input (None where it has none) and of every parameter."""
        if self.graphs is None:
            computed = torch.autograd.grad(self.outputs, self._targets(), list(grads), allow_unused=True)
            self.outputs = None
        else:
            for buffer, grad in zip(self.grad_outputs, grads):
                buffer.copy_(grad)
            self.graphs[1].replay()
            computed = self.grads
        found = iter(None if g is None else g.detach() for g in computed)
        return tuple(next(found) if grad else None for grad in NEEDS_GRAD) + tuple(found)


class _Replay(torch.autograd.Function):
    """The autograd node of a StaticLoop run: forward and backward are its static runs."""

    @staticmethod
    def forward(ctx, loop: StaticLoop, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.loop = loop
        return loop.forward_static(tensors[: len(INPUTS)])

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads: torch.Tensor):
        return (None, *ctx.loop.backward_static(grads))


def static_inputs(shape: LoopShape, decoder: FastDecoder, like: TeacherForcing) -> tuple[torch.Tensor, ...]:
    """Zeroed input buffers of a shape (mask bias 0: finite; dropout masks 1): memory, mask bias
    and masks in the parameters' dtype (the encoder's output is), the rest in the dtypes of
    `like`, a teacher-forced pass made under the run's autocast."""
    steps, rows, text = shape.frames // decoder.r, shape.rows, shape.text
    param = next(decoder.parameters())
    plain = dict(dtype=param.dtype, device=param.device)
    buffers = (
        torch.zeros(rows, text, memory_dim(decoder), **plain),
        torch.zeros(rows, text, **plain),
        like.prenet_out.new_zeros(steps, rows, like.prenet_out.size(2)),
        like.processed_memory.new_zeros(rows, text, like.processed_memory.size(2)),
        like.location_matrix.new_zeros(like.location_matrix.shape),
        torch.ones(steps, rows, decoder.attention_rnn.hidden_size, **plain),
        torch.ones(steps, rows, decoder.decoder_rnn.hidden_size, **plain),
    )
    return tuple(b.requires_grad_(grad) for b, grad in zip(buffers, NEEDS_GRAD))


@dataclass(frozen=True)
class LoopGraphs:
    """Every shape's StaticLoop (captured on CUDA), whether they were captured, and the seconds
    building them took."""

    loops: dict[LoopShape, StaticLoop]
    captured: bool
    seconds: float = 0.0

    def runner(self, shape: LoopShape) -> LoopRunner | None:
        """The loop hook (FastDecoder.loop_hook): the shape's static run, None for a shape it lacks."""
        loop = self.loops.get(shape)
        return None if loop is None else loop.run


def memory_dim(decoder: FastDecoder) -> int:
    """The width of the encoder's output, which the decoder attends to."""
    return decoder.attention.memory_layer.in_features


def build_loop_graphs(
    decoder: FastDecoder,
    shapes: Sequence[LoopShape],
    device: torch.device,
    amp_dtype: torch.dtype | None = None,
    capture: bool | None = None,
    on_shape: Callable[[LoopShape], None] | None = None,
) -> LoopGraphs:
    """A StaticLoop per shape, largest first, sharing one memory pool; captured when `capture`
    (default: on CUDA). Runs under the run's autocast (the buffers take its dtypes) and leaves
    every random generator as it found it (the probe pass draws dropout masks). `on_shape` is
    called after each shape (a progress bar: a full-model shape takes seconds to capture)."""
    tick = time.perf_counter()
    capture = device.type == "cuda" if capture is None else capture
    pool = torch.cuda.graph_pool_handle() if capture else None
    loops: dict[LoopShape, StaticLoop] = {}
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        for shape in sorted(shapes, reverse=True):
            autocast = (
                torch.autocast(device.type, dtype=amp_dtype, cache_enabled=False)
                if amp_dtype
                else contextlib.nullcontext()
            )
            with autocast:
                loops[shape] = StaticLoop(decoder, shape, probe(decoder, shape), capture, pool)
            if on_shape is not None:
                on_shape(shape)
    return LoopGraphs(loops, capture, time.perf_counter() - tick)


def probe(decoder: FastDecoder, shape: LoopShape) -> TeacherForcing:
    """A teacher-forced pass at the shape on zeros, without autograd: the dtypes and sizes of
    the loop's inputs as the run will make them."""
    param = next(decoder.parameters())
    memory = param.new_zeros(1, shape.text, memory_dim(decoder))
    mel = param.new_zeros(1, decoder.n_mels, shape.frames)
    with torch.no_grad():
        return decoder.teacher_forcing(memory, mel)


def loop_memory(decoder: FastDecoder, shape: LoopShape, dtype: torch.dtype = torch.float32) -> dict[str, int]:
    """Bytes a captured shape needs, estimated by running its loop on the meta device (no memory,
    no arithmetic): `static`, its buffers (inputs, outputs, output and input gradients, parameter
    gradients), held for the whole run; `activations`, what autograd keeps from its forward to its
    backward (shared by all shapes through the pool: the largest shape's counts). Each storage
    counts once, however many nodes save it (every step's attention saves the same memory)."""
    meta = copy.deepcopy(decoder).to(device="meta", dtype=dtype)
    loop = StaticLoop(meta, shape, probe(meta, shape))
    saved: dict[int, int] = {}
    with torch.autograd.graph.saved_tensors_hooks(partial(_note_storage, saved), lambda t: t):
        outputs = loop._loop()
    # what the loop's autograd nodes keep as attributes, not saved tensors, the loop itself counts
    held = decoder.held_bytes(shape.frames // decoder.r, shape.rows, shape.text, dtype)
    inputs = sum(_nbytes(x) for x in loop.inputs)
    grad_inputs = sum(_nbytes(x) for x, grad in zip(loop.inputs, NEEDS_GRAD) if grad)
    static = inputs + 2 * sum(_nbytes(o) for o in outputs) + grad_inputs + sum(_nbytes(p) for p in loop.params)
    return {"static": static, "activations": sum(saved.values()) + held}


def _note_storage(saved: dict[int, int], tensor: torch.Tensor) -> torch.Tensor:
    """A saved-tensors pack hook: notes the tensor's storage (by identity: meta tensors have no address)."""
    storage = tensor.untyped_storage()
    saved[storage._cdata] = storage.nbytes()
    return tensor


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()
