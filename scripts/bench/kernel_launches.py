"""What one decoder step of the fused loop launches, at the full model's sizes: for each kernel the
bytes each of its pointer arguments moves and the loops one of its programs runs, from the launch's
sizes and the compiled variant's block sizes (kernel_model.py turns them into times).

Why here. The kernels' code says what they load, but not at what sizes; this module restates each
kernel's memory walks in a few lines, per kernel, so that a change of a kernel's loops is one change
here. scripts/bench/kernels.py checks the restatement against the compiled kernel (as many innermost
loops as its SASS has) and tests/test_scripts_kernels.py that it names every pointer argument.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.config import Tacotron2Config
from scripts.bench.kernel_model import Loop

#: LJSpeech's longest text, in symbols: the attention's walks at their longest.
LJSPEECH_LONGEST_TEXT = 192
#: Bytes per element of a pointer's Triton type (kernels.py's Variant.pointers; "fp32" where unnamed).
ELEMENT_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}
#: The fused step's operations besides its six kernels (tests/test_model_fast_decoder.py counts 3 + 5
#: operations a step with both fused switches): two additions of gradients of values that two operations
#: read, the context [B, memory] and the copy of the attention LSTM's hidden state [B, hidden]: each
#: reads two and writes one.
OTHER_OPERATIONS = 2


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Sizes:
    """The full model's sizes (hparams.yaml's model_presets.full is Tacotron2Config's defaults)."""

    dim: int  # attention_dim
    memory: int  # encoder_embedding_dim: the context
    kernel: int  # attention_location_kernel_size
    attention_hidden: int  # attention_rnn_dim
    decoder_hidden: int  # decoder_rnn_dim
    text: int


def full_sizes(text: int = LJSPEECH_LONGEST_TEXT) -> Sizes:
    cfg = Tacotron2Config(n_symbols=1)
    return Sizes(
        cfg.attention_dim,
        cfg.encoder_embedding_dim,
        cfg.attention_location_kernel_size,
        cfg.attention_rnn_dim,
        cfg.decoder_rnn_dim,
        text,
    )


@dataclass(frozen=True)
class StepLaunch:
    """One kernel launch of a decoder step: the Triton function's name, what it computes, and the sizes
    that do not depend on the rows. An LSTM cell's inputs (`widths`) are in the kernel's order."""

    kernel: str
    label: str
    hidden: int = 0
    widths: tuple[int, ...] = ()
    extra: bool = False  # an LSTM backward that adds h's gradient from the projection (HAS_EXTRA)

    @property
    def width(self) -> int:
        return sum(self.widths)


def step_launches(sizes: Sizes) -> list[StepLaunch]:
    """A fused decoder step (model/fast_decoder.FastDecoder.fast_step): the attention LSTM cell reads
    [context, its hidden state] (the prenet's share is precomputed for all steps), the attention, then
    the decoder cell reads [attention hidden state, context, its hidden state]; each forward and backward."""
    attention_cell = (sizes.memory, sizes.attention_hidden)
    decoder_cell = (sizes.attention_hidden, sizes.memory, sizes.decoder_hidden)
    return [
        StepLaunch("attention_forward_kernel", "attention forward"),
        StepLaunch("attention_backward_kernel", "attention backward"),
        StepLaunch("lstm_forward_kernel", "lstm forward, attention cell", sizes.attention_hidden, attention_cell),
        StepLaunch("lstm_forward_kernel", "lstm forward, decoder cell", sizes.decoder_hidden, decoder_cell),
        StepLaunch("lstm_backward_kernel", "lstm backward, attention cell", sizes.attention_hidden, attention_cell),
        StepLaunch("lstm_backward_kernel", "lstm backward, decoder cell", sizes.decoder_hidden, decoder_cell, True),
    ]


def fits(launch: StepLaunch, consts: dict) -> bool:
    """Whether a variant was compiled for this launch: an LSTM forward for its number of inputs, a
    backward with or without the extra gradient as it launches; any variant of the attention kernels.
    A launch without a variant of its own is predicted from another (the decoder cell's, say)."""
    if launch.kernel == "lstm_forward_kernel":
        return consts.get("NPARTS") == len(launch.widths)
    if launch.kernel == "lstm_backward_kernel":
        return consts.get("HAS_EXTRA") == launch.extra
    return True


def lstm_forward_traffic(launch: StepLaunch, rows: int, consts: dict) -> dict:
    """Elements and passes per pointer: the precomputed term, the inputs, the weights, the cell and the
    dropout mask read; the inputs' row, h, c and the gates' activations written."""
    b, h, k = rows, launch.hidden, launch.width
    parts = list(launch.widths) + [0] * (3 - len(launch.widths))
    state = (b * h, 1)
    return {
        "pre_ptr": (b * 4 * h, 1),
        **{f"p{i}_ptr": (b * width, 1) for i, width in enumerate(parts)},
        "w_ptr": (4 * h * k, 1),
        "row_ptr": (b * k, 1),
        "cell_ptr": state,
        "keep_ptr": state if consts.get("HAS_KEEP", True) else (0, 1),
        "h_ptr": state,
        "c_ptr": state,
        "act_ptr": (b * 4 * h, 1),
    }


def lstm_backward_traffic(launch: StepLaunch, rows: int, consts: dict) -> dict:
    """The activations, both cells, the mask, h's and c's gradients and the weights read; the gates',
    the previous cell's and the inputs' gradients written."""
    b, h, k = rows, launch.hidden, launch.width
    state = (b * h, 1)
    return {
        "act_ptr": (b * 4 * h, 1),
        "cell_ptr": state,
        "c_ptr": state,
        "keep_ptr": state if consts.get("HAS_KEEP", True) else (0, 1),
        "dh_ptr": state,
        "dhx_ptr": state if launch.extra else (0, 1),
        "dc_ptr": state,
        "w_ptr": (4 * h * k, 1),
        "dgates_ptr": (b * 4 * h, 1),
        "dcell_ptr": state,
        "dx_ptr": (b * k, 1),
    }


def attention_forward_traffic(sizes: Sizes, rows: int) -> dict:
    """The query's inputs, memory, processed memory, both weights and the scoring matrix read; the row,
    the query, the copy of ah, the context and the weights written; the energies written and read back."""
    b, h, d, t = rows, sizes.attention_hidden, sizes.dim, sizes.text
    text = (b * t, 1)
    return {
        "ah_ptr": (b * h, 1),
        "wq_ptr": (d * h, 1),
        "preq_ptr": (b * d, 1),
        "mem_ptr": (b * t * sizes.memory, 1),
        "pm_ptr": (b * t * d, 1),
        "prev_ptr": text,
        "cum_ptr": text,
        "vl_ptr": ((2 * sizes.kernel + 1) * d, 1),
        "mask_ptr": text,
        "row_ptr": (b * h, 1),
        "q_ptr": (b * d, 1),
        "ahout_ptr": (b * h, 1),
        "ctx_ptr": (b * sizes.memory, 1),
        "w_ptr": text,
        "newcum_ptr": text,
        "energy_ptr": (b * t, 2),
    }


def attention_backward_traffic(sizes: Sizes, rows: int, consts: dict) -> dict:
    """The forward's inputs and results and the outputs' gradients read; the inputs' gradients written
    (read too where added in place: PM_ACC, PART_ACC; the partials are read back chunk by chunk); the
    weights' and the location features' gradients written and read back (scratch)."""
    b, h, d, t, m = rows, sizes.attention_hidden, sizes.dim, sizes.text, sizes.memory
    text = (b * t, 1)
    return {
        "q_ptr": (b * d, 1),
        "wq_ptr": (d * h, 1),
        "mem_ptr": (b * t * m, 1),
        "pm_ptr": (b * t * d, 1),
        "prev_ptr": text,
        "cum_ptr": text,
        "vl_ptr": ((2 * sizes.kernel + 1) * d, 1),
        "w_ptr": text,
        "dctx_ptr": (b * m, 1),
        "dw_ptr": text,
        "dnewcum_ptr": text,
        "dahin_ptr": (b * h, 1),
        "dctxx_ptr": (b * m if consts["CTX_EXTRA"] else 0, 1),
        "dwx_ptr": (b * t if consts["W_EXTRA"] else 0, 1),
        "dah_ptr": (b * h, 1),
        "dq_ptr": (b * d, 1),
        "dmem_ptr": (b * t * m if consts["MEMORY_GRAD"] else 0, 1),
        "dpm_ptr": (b * t * d, 2 if consts["PM_ACC"] else 1),
        "dprev_ptr": text,
        "dcum_ptr": text,
        "part_ptr": (b * (2 * sizes.kernel + 1) * d, 2),
        "dws_ptr": (b * t, 2),
        "g_ptr": (b * t * consts["BJ"], 2),
    }


def traffic(launch: StepLaunch, sizes: Sizes, rows: int, consts: dict) -> dict:
    """Each pointer argument of the launch's kernel: (elements, passes over them)."""
    if launch.kernel == "lstm_forward_kernel":
        return lstm_forward_traffic(launch, rows, consts)
    if launch.kernel == "lstm_backward_kernel":
        return lstm_backward_traffic(launch, rows, consts)
    if launch.kernel == "attention_forward_kernel":
        return attention_forward_traffic(sizes, rows)
    return attention_backward_traffic(sizes, rows, consts)


def launch_bytes(launch: StepLaunch, sizes: Sizes, rows: int, consts: dict, pointers: dict) -> int:
    """The bytes a launch moves: each pointer's elements times its passes times its element's bytes."""
    moved = traffic(launch, sizes, rows, consts)
    return sum(n * passes * ELEMENT_BYTES[pointers.get(name, "fp32")] for name, (n, passes) in moved.items())


def loops(launch: StepLaunch, sizes: Sizes, consts: dict) -> tuple[tuple[Loop, ...], int]:
    """One program's innermost loops in code order and the round trips it waits outside them.
    LSTM forward: a walk over each input's columns (an input the launch lacks: none of its loop's
    iterations), then the pointwise epilogue's loads. LSTM backward: one walk over the hidden units.
    Attention forward: the query's walk over ah; the energies' walk over the text; the context's walk
    over the text for each block of memory columns; outside, the query's and the softmax's loads.
    Attention backward: the weights' gradient (memory columns, for each chunk of text, whose own
    loads it waits); the chain walk (not pipelined: two round trips, the chunk and the partial sum it
    reads back); the query's gradient over ah; the unfolding's walk; outside, the softmax's sum and
    the partials' last row."""
    t, m, h = sizes.text, sizes.memory, sizes.attention_hidden
    if launch.kernel == "lstm_forward_kernel":
        widths = list(launch.widths) + [0] * (consts["NPARTS"] - len(launch.widths))
        return tuple(Loop(cdiv(k, consts["BK"])) for k in widths), 1
    if launch.kernel == "lstm_backward_kernel":
        return (Loop(cdiv(launch.hidden, consts["BH"])),), 0
    chunks = cdiv(t, consts["BTC"])
    if launch.kernel == "attention_forward_kernel":
        return (Loop(cdiv(h, consts["BH"])), Loop(chunks), Loop(chunks, passes=cdiv(m, consts["BM"]))), 2
    weights = Loop(cdiv(m, consts["BM"]), passes=chunks, outer_wait=True)
    return (weights, Loop(chunks, dependent=2), Loop(cdiv(h, consts["BH"])), Loop(chunks)), 2


def other_bytes(sizes: Sizes, rows: int) -> int:
    """The step's two additions (OTHER_OPERATIONS), float32: three passes over each of the two values."""
    return 3 * rows * (sizes.memory + sizes.attention_hidden) * ELEMENT_BYTES["fp32"]
