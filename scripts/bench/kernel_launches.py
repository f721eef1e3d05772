"""What one decoder step launches as Triton kernels, in either design of its LSTM cells, at the full
model's sizes: for each kernel the bytes each of its pointer arguments moves and the loops one of its
programs runs, from the launch's sizes and the compiled variant's block sizes (kernel_model.py turns
them into times; kernel_operations.py has the step's other launches).

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
    """One Triton kernel launch of a decoder step: the function's name, what it computes, and the sizes
    that do not depend on the rows. An LSTM cell's inputs (`widths`) are in the kernel's order."""

    kernel: str
    label: str
    hidden: int = 0
    widths: tuple[int, ...] = ()
    extra: bool = False  # a pointwise backward that adds h's gradient from the projection (HAS_EXTRA)

    @property
    def width(self) -> int:
        return sum(self.widths)


#: The two designs of a decoder step's LSTM cells (model.fused_lstm, model.split_lstm), both beside the
#: fused attention.
DESIGNS = ("fused", "split")


def cell_inputs(sizes: Sizes) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The attention cell reads [context, its hidden state] (the prenet's share is precomputed for all
    steps); the decoder cell [attention hidden state, context, its hidden state]."""
    return (sizes.memory, sizes.attention_hidden), (sizes.attention_hidden, sizes.memory, sizes.decoder_hidden)


def attention_launches() -> list[StepLaunch]:
    """The fused attention's four kernels, in either design: each direction one operation of two
    launches (model/ops/attention_kernels.py, attention_backward_kernels.py)."""
    return [
        StepLaunch("attention_energies_kernel", "attention energies"),
        StepLaunch("attention_context_kernel", "attention context"),
        StepLaunch("attention_chain_backward_kernel", "attention chain backward"),
        StepLaunch("attention_filter_backward_kernel", "attention filter backward"),
    ]


def step_launches(sizes: Sizes, design: str = "fused") -> list[StepLaunch]:
    """A decoder step's Triton launches (model/fast_decoder.FastDecoder.fast_step): the attention's four
    and each LSTM cell's. Fused (lstm_cell.py): forward one kernel, backward the pointwise gates'
    gradients and the inputs' product. Split (lstm_split.py): the pointwise kernel each way, the
    products on cuBLAS (step_operations). The decoder cell's backward adds h's gradient from the
    projection (HAS_EXTRA)."""
    cells = zip(("attention cell", "decoder cell"), (sizes.attention_hidden, sizes.decoder_hidden), cell_inputs(sizes))
    found = attention_launches()
    for (name, hidden, widths), extra in zip(cells, (False, True)):
        forward = "lstm_forward_kernel" if design == "fused" else "lstm_pointwise_forward_kernel"
        found += [
            StepLaunch(forward, f"{forward.removesuffix('_kernel').replace('_', ' ')}, {name}", hidden, widths),
            StepLaunch("lstm_pointwise_backward_kernel", f"lstm pointwise backward, {name}", hidden, widths, extra),
        ]
        if design == "fused":
            found.append(StepLaunch("lstm_backward_inputs_kernel", f"lstm backward inputs, {name}", hidden, widths))
    return found


def fits(launch: StepLaunch, consts: dict, shares: dict) -> bool:
    """Whether a variant was compiled for this launch: an LSTM forward for its number of inputs, a
    pointwise backward with or without the extra gradient as it launches, an attention kernel for the
    shares of a row that its constexprs follow at these rows (`shares`: kernel_variants.row_shares);
    any variant of the others. A launch without a variant of its own is predicted from another (the
    decoder cell's, say)."""
    if launch.kernel == "lstm_forward_kernel":
        return consts.get("NPARTS") == len(launch.widths)
    if launch.kernel == "lstm_pointwise_backward_kernel":
        return consts.get("HAS_EXTRA") == launch.extra
    return all(consts[name] == value for name, value in shares.items() if name in consts)


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


def lstm_pointwise_backward_traffic(launch: StepLaunch, rows: int, consts: dict) -> dict:
    """The activations, both cells, the mask, h's (and the projection's) and c's gradients read; the
    gates' and the previous cell's gradients written."""
    state = (rows * launch.hidden, 1)
    return {
        "act_ptr": (rows * 4 * launch.hidden, 1),
        "cell_ptr": state,
        "c_ptr": state,
        "keep_ptr": state if consts.get("HAS_KEEP", True) else (0, 1),
        "dh_ptr": state,
        "dhx_ptr": state if launch.extra else (0, 1),
        "dc_ptr": state,
        "dgates_ptr": (rows * 4 * launch.hidden, 1),
        "dcell_ptr": state,
    }


def lstm_pointwise_forward_traffic(launch: StepLaunch, rows: int, consts: dict) -> dict:
    """The gates' pre-activations (cuBLAS's output), the cell and the mask read; h, c and the gates'
    activations written."""
    state = (rows * launch.hidden, 1)
    return {
        "gates_ptr": (rows * 4 * launch.hidden, 1),
        "cell_ptr": state,
        "keep_ptr": state if consts.get("HAS_KEEP", True) else (0, 1),
        "h_ptr": state,
        "c_ptr": state,
        "act_ptr": (rows * 4 * launch.hidden, 1),
    }


def lstm_backward_inputs_traffic(launch: StepLaunch, rows: int) -> dict:
    """The gates' gradients and the weights read (the weights once per launch: kernel_model's L2
    assumption), the inputs' gradient written."""
    return {
        "dgates_ptr": (rows * 4 * launch.hidden, 1),
        "w_ptr": (4 * launch.hidden * launch.width, 1),
        "dx_ptr": (rows * launch.width, 1),
    }


def attention_energies_traffic(sizes: Sizes, rows: int) -> dict:
    """The query's inputs, the processed memory, both weights' windows, the scoring matrix and the mask
    read; the row, the query, the copy of ah and the energies (a [B, T] scratch) written. Each tensor
    once: what every program of a row reads (the query layer's weight, ah) comes from L2 after the
    first (kernel_model's assumption)."""
    b, h, d, t = rows, sizes.attention_hidden, sizes.dim, sizes.text
    text = (b * t, 1)
    return {
        "ah_ptr": (b * h, 1),
        "wq_ptr": (d * h, 1),
        "preq_ptr": (b * d, 1),
        "pm_ptr": (b * t * d, 1),
        "prev_ptr": text,
        "cum_ptr": text,
        "vl_ptr": ((2 * sizes.kernel + 1) * d, 1),
        "mask_ptr": text,
        "row_ptr": (b * h, 1),
        "q_ptr": (b * d, 1),
        "ahout_ptr": (b * h, 1),
        "energy_ptr": text,
    }


def attention_context_traffic(sizes: Sizes, rows: int) -> dict:
    """Memory, the cumulative weights and the energies read (each program of a row reads the row's
    energies twice, the softmax's and the walk's: from L2); the context, the weights and the new
    cumulative weights written."""
    text = (rows * sizes.text, 1)
    return {
        "mem_ptr": (rows * sizes.text * sizes.memory, 1),
        "cum_ptr": text,
        "energy_ptr": text,
        "ctx_ptr": (rows * sizes.memory, 1),
        "w_ptr": text,
        "newcum_ptr": text,
    }


def attention_chain_backward_traffic(sizes: Sizes, rows: int, consts: dict) -> dict:
    """The forward's inputs and results and the outputs' gradients read; the processed memory's
    gradient written (read too where added in place: PM_ACC) and memory's (MEMORY_GRAD); the scratch:
    the weights' gradient written and read back by the chain walk, dx and the slices' partial sums
    written for the filter launch. The weights and their gradients are read twice (the walks and the
    softmax's sum over the row's text), the weights a third time by the memory walk under MEMORY_GRAD."""
    b, d, t, m = rows, sizes.dim, sizes.text, sizes.memory
    text, twice = (b * t, 1), (b * t, 2)
    return {
        "q_ptr": (b * d, 1),
        "mem_ptr": (b * t * m, 1),
        "pm_ptr": (b * t * d, 1),
        "prev_ptr": text,
        "cum_ptr": text,
        "vl_ptr": ((2 * sizes.kernel + 1) * d, 1),
        "w_ptr": (b * t, 2 + consts["MEMORY_GRAD"]),
        "ctx_ptr": (b * m, 1),
        "dctx_ptr": (b * m, 1),
        "dw_ptr": twice,
        "dnewcum_ptr": twice,
        "dctxx_ptr": (b * m if consts["CTX_EXTRA"] else 0, 1),
        "dwx_ptr": (b * t if consts["W_EXTRA"] else 0, 2),
        "dmem_ptr": (b * t * m if consts["MEMORY_GRAD"] else 0, 1),
        "dpm_ptr": (b * t * d, 2 if consts["PM_ACC"] else 1),
        "dws_ptr": twice,
        "dx_ptr": (b * t * d, 1),
        "dqv_ptr": (b * cdiv(t, consts["SLICE"]) * 2 * consts["BD"], 1),
    }


def attention_filter_backward_traffic(sizes: Sizes, rows: int, consts: dict) -> dict:
    """The query layer's weight, the weights' windows, the location matrix, the chain launch's dx and
    partial sums, the gradients of the new cumulative weights and of ah's copy read; ah's, the
    precomputed term's, the previous and cumulative weights' and the scoring matrix's (the partials,
    read too where added in place: PART_ACC) gradients written. dx is read twice (the location
    matrix's gradient over the text, the windows' over the slices and their halos), the programs'
    windows' gradients (g) written and read back."""
    b, h, d, t = rows, sizes.attention_hidden, sizes.dim, sizes.text
    text, slices = (b * t, 1), cdiv(t, consts["SLICE"])
    return {
        "wq_ptr": (d * h, 1),
        "prev_ptr": text,
        "cum_ptr": text,
        "vl_ptr": (2 * sizes.kernel * d, 1),
        "dx_ptr": (b * t * d, 2),
        "dqv_ptr": (b * slices * 2 * consts["BD"], 1),
        "dnewcum_ptr": text,
        "dahin_ptr": (b * h, 1),
        "dah_ptr": (b * h, 1),
        "dq_ptr": (b * d, 1),
        "dprev_ptr": text,
        "dcum_ptr": text,
        "part_ptr": (b * (2 * sizes.kernel + 1) * d, 2 if consts["PART_ACC"] else 1),
        "g_ptr": (b * slices * consts["G_ROWS"] * consts["BJ"], 2),
    }


def traffic(launch: StepLaunch, sizes: Sizes, rows: int, consts: dict) -> dict:
    """Each pointer argument of the launch's kernel: (elements, passes over them)."""
    if launch.kernel == "lstm_forward_kernel":
        return lstm_forward_traffic(launch, rows, consts)
    if launch.kernel == "lstm_pointwise_forward_kernel":
        return lstm_pointwise_forward_traffic(launch, rows, consts)
    if launch.kernel == "lstm_pointwise_backward_kernel":
        return lstm_pointwise_backward_traffic(launch, rows, consts)
    if launch.kernel == "lstm_backward_inputs_kernel":
        return lstm_backward_inputs_traffic(launch, rows)
    return attention_traffic(launch, sizes, rows, consts)


def attention_traffic(launch: StepLaunch, sizes: Sizes, rows: int, consts: dict) -> dict:
    """The attention kernels' traffic (attention_energies_traffic and the three others)."""
    if launch.kernel == "attention_energies_kernel":
        return attention_energies_traffic(sizes, rows)
    if launch.kernel == "attention_context_kernel":
        return attention_context_traffic(sizes, rows)
    if launch.kernel == "attention_chain_backward_kernel":
        return attention_chain_backward_traffic(sizes, rows, consts)
    return attention_filter_backward_traffic(sizes, rows, consts)


def launch_bytes(launch: StepLaunch, sizes: Sizes, rows: int, consts: dict, pointers: dict) -> int:
    """The bytes a launch moves: each pointer's elements times its passes times its element's bytes."""
    moved = traffic(launch, sizes, rows, consts)
    return sum(n * passes * ELEMENT_BYTES[pointers.get(name, "fp32")] for name, (n, passes) in moved.items())


def loops(launch: StepLaunch, sizes: Sizes, consts: dict) -> tuple[tuple[Loop, ...], int]:
    """One program's innermost loops in code order and the round trips it waits outside them.
    LSTM forward: a walk over each input's columns (an input the launch lacks: none of its loop's
    iterations), then the pointwise epilogue's loads. LSTM backward's inputs' product: one walk over
    the 4H gate columns. The pointwise kernels: no loop, one round trip (their loads, side by side)."""
    if launch.kernel == "lstm_forward_kernel":
        widths = list(launch.widths) + [0] * (consts["NPARTS"] - len(launch.widths))
        return tuple(Loop(cdiv(k, consts["BK"])) for k in widths), 1
    if launch.kernel == "lstm_backward_inputs_kernel":
        return (Loop(cdiv(4 * launch.hidden, consts["BJ"])),), 0
    if launch.kernel.startswith("lstm_pointwise"):
        return (), 1
    return attention_loops(launch, sizes, consts)


def attention_loops(launch: StepLaunch, sizes: Sizes, consts: dict) -> tuple[tuple[Loop, ...], int]:
    """One program's loops at its launch's shares of a row (consts: the variant's constexprs, its
    module's stages and kernel_variants.row_shares). Energies: the query's walk over ah, then the
    slice's chunks; outside, v, the precomputed term and the location matrix, side by side. Context:
    the walk over the text in memory tiles; outside, the row's energies. Chain backward: the slice's
    memory tiles (the weights' gradient), then the chain walk over its chunks (CHAIN_STAGES in
    flight); outside, the context's gradient, the softmax's sum's loads, then q, v and the location
    matrix. Filter backward: the slices' partial sums, the query's backward over the program's hidden
    units, the location matrix's gradient over the row's text (the longest program's: the first
    always walks it), the windows' gradient over the slice and its halos, the unfolding over the
    slice; outside, the location matrix and the partials' two sums added in place (v's row, the
    location matrix's)."""
    t, chunks = sizes.text, cdiv(consts["SLICE"], consts["BTC"]) if "SLICE" in consts else 0
    if launch.kernel == "attention_energies_kernel":
        return (Loop(cdiv(sizes.attention_hidden, consts["BH"])), Loop(chunks)), 1
    if launch.kernel == "attention_context_kernel":
        return (Loop(cdiv(t, consts["BTM"])),), 1
    if launch.kernel == "attention_chain_backward_kernel":
        return (Loop(cdiv(consts["SLICE"], consts["BTM"])), Loop(chunks, stages=consts["CHAIN_STAGES"])), 3
    halo = cdiv(consts["SLICE"] + 2 * ((sizes.kernel - 1) // 2), consts["BTC"])
    walks = (cdiv(t, consts["SLICE"]), cdiv(consts["HIDDEN_SLICE"], consts["BH"]), cdiv(t, consts["BTC"]), halo, chunks)
    return tuple(Loop(n) for n in walks), 1 + 2 * consts["PART_ACC"]
