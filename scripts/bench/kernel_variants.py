"""The kernel variants the compiler's report compiles (scripts/bench/kernels.py): each Triton kernel of
the decoder step at the full model's sizes, as the fast loop launches it, in each precision it runs
in, at its module's blocks and warps (the defaults) and at others given.

Why apart. What is compiled (the launch's constexprs, pointer types and divisibility) is the report's
one statement of how the model launches its kernels; the compiling and the prediction read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl

from model.ops import attention_backward_kernels, attention_kernels, lstm_kernels, lstm_pointwise_kernels
from model.ops.attention_step import CHUNK
from scripts.bench.kernel_launches import full_sizes

#: The full model's sizes (kernel_launches.full_sizes: Tacotron2Config's defaults, which hparams.yaml's
#: model_presets.full keeps; LJSpeech's longest text, 192 symbols): attention 128, memory 512, location
#: kernel 31, both LSTMs 1024 wide; the attention cell reads [context, hidden] (512 + 1024), the decoder
#: cell [attention hidden, context, hidden] (1024 + 512 + 1024).
SIZES = full_sizes()
#: The modules whose kernels the report compiles.
KERNEL_MODULES = (attention_kernels, attention_backward_kernels, lstm_kernels, lstm_pointwise_kernels)
#: The rows at whose shares of a row (columns, memory tiles) the attention launches whose shares follow
#: the rows are compiled: the report's.
SHARE_ROWS = (16, 64)
FULL = {
    "dim": SIZES.dim,
    "memory": SIZES.memory,
    "kernel": SIZES.kernel,
    "hidden": SIZES.decoder_hidden,
    "text": SIZES.text,
}
#: The decoder cell's forward as the fast loop launches it: three inputs, the dropout mask
#: (model/fast_steps.py).
LSTM_FORWARD = {"NPARTS": 3, "HAS_KEEP": True}
#: The attention backward as the fast loop launches it: memory's gradient summed after the loop,
#: the processed memory's and the scoring partials' added in place, the context's gradient from the
#: projection added in (the weights' too where a loss reads the alignments) (model/fast_steps.py)
LOOP_BACKWARD = {"MEMORY_GRAD": False, "PM_ACC": True, "PART_ACC": True, "CTX_EXTRA": True, "W_EXTRA": False}


@dataclass(frozen=True)
class Variant:
    kernel: (
        str  # the kernel's name, as the table prints it: "what, precision[, more]" (the prediction reads the precision)
    )
    fn: object  # the @triton.jit function
    pointers: dict  # argument name -> Triton element type of that pointer ("fp32" for the rest)
    constexprs: dict
    num_warps: int
    default: bool
    #: arguments a launch at the full model's sizes finds divisible by 16 (16-byte aligned pointers,
    #: sizes and strides), which Triton's launcher specializes on: its loads vectorize (bf16 needs it
    #: for cp.async: a 2-byte load cannot be one)
    aligned: tuple = ()


#: Each precision a kernel is compiled in: its label, the pointers that are bf16 under autocast (beyond
#: the kernel's own: BF16_POINTERS), and the float32 products' PRECISION where the kernel takes one. A
#: kernel without a PRECISION constexpr is compiled in "fp32" (its products, if any, as kernel_math.mma's
#: default, three TF32 products) and bf16.
PRECISIONS = (("tf32x3", False, "tf32x3"), ("tf32", False, "tf32"), ("bf16", True, "tf32x3"))
PLAIN_PRECISIONS = (("fp32", False, None), ("bf16", True, None))
#: The pointers autocast's bf16 makes bf16, per kernel family: the attention's query layer (weight,
#: precomputed term, row), memory and processed memory; the LSTM's weights, row and gates (their
#: pre-activations and gradients).
BF16_POINTERS = {
    "attention": ("wq_ptr", "preq_ptr", "row_ptr", "dq_ptr", "mem_ptr", "pm_ptr"),
    "lstm": ("w_ptr", "row_ptr", "gates_ptr", "dgates_ptr"),
}


def precisions(fn, family: str) -> list[tuple[str, dict, dict]]:
    """(label, pointer types, PRECISION constexpr if any) of each precision `fn` is compiled in."""
    names = set(fn.arg_names)
    choices = PRECISIONS if "PRECISION" in names else PLAIN_PRECISIONS
    found = []
    for label, low, mma in choices:
        pointers = {name: "bf16" for name in BF16_POINTERS[family] if low and name in names}
        found.append((label, pointers, {} if mma is None else {"PRECISION": mma}))
    return found


#: The attention kernels' size arguments that are the model's own (memory, attention and hidden
#: widths: 512, 128, 1024 in the full model, divisible by 16 at every launch); the text's length, its
#: slices and the strides vary with the batch, so the launch specializes on none of them.
MODEL_SIZES = ("M", "D", "H")


def attention_variants(chunks: list[int], warps: list[int]) -> list[Variant]:
    """The attention kernels (attention_launches) in each of their precisions (precisions), at each
    chunk and warp count."""
    launches = [launch for chunk in chunks for launch in attention_launches(chunk)] + context_launches()
    found = []
    for name, more, fn, launch, chunk in launches:
        for num_warps in warps:
            default = chunk in (None, CHUNK) and num_warps == attention_kernels.NUM_WARPS
            for precision, low, mma in precisions(fn, "attention"):
                consts = {
                    key: value for key, value in {**launch, "ACC": tl.float32, **mma}.items() if key in fn.arg_names
                }
                aligned = tuple(a for a in fn.arg_names if a.endswith("_ptr") or a in MODEL_SIZES)
                found.append(Variant(f"{name}, {precision}, {more}", fn, low, consts, num_warps, default, aligned))
    return found


def attention_launches(chunk: int) -> list[tuple[str, str, object, dict, int]]:
    """The attention kernels that walk chunks, as the fast loop launches them: (name, the label's
    tail, function, constexprs, chunk). The backward's filter launch, whose column share (DC) follows
    the rows, at those of B0 16 and 64 (SHARE_ROWS)."""
    blocks = attention_kernels.blocks(FULL["text"], FULL["memory"], FULL["dim"], FULL["kernel"], chunk)
    chain = attention_backward_kernels.attention_chain_backward_kernel
    found = [
        ("attention energies", f"chunk {chunk}", attention_kernels.attention_energies_kernel, blocks, chunk),
        ("attention chain backward", f"chunk {chunk}", chain, {**blocks, **LOOP_BACKWARD}, chunk),
    ]
    fn = attention_backward_kernels.attention_filter_backward_kernel
    for rows in SHARE_ROWS:
        launch = {**blocks, **LOOP_BACKWARD, "DC": row_shares(fn, rows, chunk)["DC"]}
        found.append(("attention filter backward", f"chunk {chunk}, B0 {rows}", fn, launch, chunk))
    return found


def context_launches() -> list[tuple[str, str, object, dict, None]]:
    """The forward's context launch (no chunk, no product) at B0 16 and 64 (SHARE_ROWS), whose column
    slices and memory tiles follow the rows: as attention_launches."""
    fn = attention_kernels.attention_context_kernel
    launch = {"BT": triton.next_power_of_2(FULL["text"])}
    return [("attention context", f"B0 {rows}", fn, {**launch, **row_shares(fn, rows)}, None) for rows in SHARE_ROWS]


def row_shares(fn, rows: int, chunk: int = CHUNK) -> dict:
    """What of an attention launch follows the rows, by the names its kernel takes (constexprs and
    arguments; none for another kernel), as the launchers (attention_kernels.forward,
    attention_backward_kernels.backward) compute it: the context's column slice (BMC) and memory tile
    (BTM); the text kernels' slice of symbols (SLICE), and the filter backward's attention columns
    (DC), hidden units (HIDDEN_SLICE) and halo rows (G_ROWS)."""
    t, names = FULL["text"], fn.arg_names
    if "BMC" in names:
        columns = attention_kernels.context_columns(rows, FULL["memory"])
        return {"BMC": columns, "BTM": attention_kernels.memory_tile_rows(t, columns, attention_kernels.CONTEXT_TILE)}
    blocks = attention_kernels.blocks(t, FULL["memory"], FULL["dim"], FULL["kernel"], chunk)
    slice_symbols = attention_kernels.text_slice(rows, t, blocks["BTC"])
    slices = attention_kernels.text_grid(rows, t, slice_symbols)[1]
    columns, hidden = attention_backward_kernels.filter_shares(slices, blocks["BD"], FULL["hidden"], blocks["BH"])
    g_rows = attention_backward_kernels.halo_rows(slice_symbols, FULL["kernel"], blocks["BTC"])
    found = {"SLICE": slice_symbols, "DC": columns, "HIDDEN_SLICE": hidden, "G_ROWS": g_rows}
    return {name: value for name, value in found.items() if name in names}


def lstm_kernels_launched() -> list[tuple[str, object, dict, int]]:
    """The LSTM kernels as the fast loop launches them for the decoder cell (three inputs, the dropout
    mask, the projection's gradient of h): (name, function, constexprs, warps). The pointwise kernels
    are the split cell's two and the fused cell's backward's first."""
    pointwise = {"BLOCK": lstm_pointwise_kernels.BLOCK, "HAS_KEEP": True, "ACC": tl.float32}
    return [
        ("lstm forward", lstm_kernels.lstm_forward_kernel,
         {**lstm_kernels.FORWARD_BLOCKS, **LSTM_FORWARD, "ACC": tl.float32}, lstm_kernels.NUM_WARPS),
        ("lstm backward inputs", lstm_kernels.lstm_backward_inputs_kernel,
         {**lstm_kernels.INPUTS_BLOCKS, "ACC": tl.float32}, lstm_kernels.INPUTS_WARPS),
        ("lstm pointwise forward", lstm_pointwise_kernels.lstm_pointwise_forward_kernel,
         pointwise, lstm_pointwise_kernels.NUM_WARPS),
        ("lstm pointwise backward", lstm_pointwise_kernels.lstm_pointwise_backward_kernel,
         {**pointwise, "HAS_EXTRA": True}, lstm_pointwise_kernels.NUM_WARPS),
    ]  # fmt: skip


def lstm_variants(warps: list[int] | None) -> list[Variant]:
    """The LSTM kernels (lstm_kernels_launched) at their launch's warps and each of `warps` (None: only
    the launch's), in each of their precisions (precisions): the products' kernels in tf32x3, tf32 and
    bf16, the pointwise ones (no product) in fp32 and bf16."""
    found = []
    for name, fn, launch_consts, launched in lstm_kernels_launched():
        for precision, low, mma in precisions(fn, "lstm"):
            consts = {**launch_consts, **mma}
            aligned = tuple(a for a in fn.arg_names if a not in consts and a != "B")  # B0 rows: any
            for num_warps in [launched] if warps is None else sorted({launched, *warps}):
                found.append(
                    Variant(f"{name}, {precision}", fn, low, consts, num_warps, num_warps == launched, aligned)
                )
    return found


def default_variants() -> list[Variant]:
    """What the model launches: each kernel at its module's chunk and warps, in each of its precisions."""
    attention = attention_variants([CHUNK], [attention_kernels.NUM_WARPS])
    return attention + lstm_variants(None)
