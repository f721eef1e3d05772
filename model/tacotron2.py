"""Tacotron2 (Shen et al. 2018) following NVIDIA's recipe: encoder, attention decoder, postnet.

Masking: outputs beyond each mel length are set to 0 (mels) and to a large positive logit
(gate: "stop"), as NVIDIA does, so they add nothing to the loss numerators. The decoder's mel is
also masked *before* the postnet, and every encoder and postnet convolution zeroes its padded
input positions, so no real output depends on what the padding holds nor on how much there is.

Packed blocks (BLoad): forward(batch) with batch.packing takes mel [R, n_mels, T] holding R blocks of several
utterances each, and the texts as an ordinary padded batch of the N utterances. The encoder runs
on that padded batch (its convolutions and BiLSTM never see a neighbour), its outputs are placed
on each block's concatenated text axis, the decoder resets at every utterance start and attends
to that utterance's text only, and the postnet runs per utterance (gathered into a padded batch
and scattered back), so in eval mode an utterance's outputs in a block equal its outputs alone.
"""

import math
from typing import NamedTuple

import torch
from torch import nn

from .batch import Batch
from .config import Tacotron2Config
from .decoder import Decoder
from .fast_decoder import FastDecoder
from .layers import Encoder, Postnet
from .packing import gather_utterances, positions_mask, scatter_text, scatter_utterances, step_layout, step_mask_bias
from .shapes import LoopShape, ceil_div

# Gate logit written at padded frames: sigmoid(1e3) == 1, i.e. "stop", with ~0 BCE against 1.
GATE_PAD_LOGIT = 1e3


class Tacotron2Output(NamedTuple):
    mel: torch.Tensor  # [B, n_mels, T] decoder output
    mel_postnet: torch.Tensor  # [B, n_mels, T] decoder output + postnet residual
    gate: torch.Tensor  # [B, T] stop-token logits
    alignments: torch.Tensor  # [B, T / r, T_text]

    @property
    def n_frames_per_step(self) -> int:
        """The decoder's r, as its outputs show it (T frames in T / r steps): what the loss reads,
        so that r has one source, the model's config."""
        return self.mel.size(2) // self.alignments.size(1)


class Tacotron2Inference(NamedTuple):
    mel_postnet: torch.Tensor  # [B, n_mels, T]; zero beyond each item's stop frame
    gate: torch.Tensor  # [B, T] logits; GATE_PAD_LOGIT beyond each item's stop frame
    alignments: torch.Tensor  # [B, steps, T_text]


class Tacotron2(nn.Module):
    def __init__(self, cfg: Tacotron2Config):
        super().__init__()
        self.cfg = cfg
        self.embedding = nn.Embedding(cfg.n_symbols, cfg.symbols_embedding_dim)
        # Xavier-uniform bound for an (n_symbols x dim) matrix, as NVIDIA initialises it.
        bound = math.sqrt(6.0 / (cfg.n_symbols + cfg.symbols_embedding_dim))
        nn.init.uniform_(self.embedding.weight, -bound, bound)
        self.encoder = Encoder(
            cfg.symbols_embedding_dim,
            cfg.encoder_n_convolutions,
            cfg.encoder_embedding_dim,
            cfg.encoder_kernel_size,
            cfg.encoder_dropout,
        )
        self.decoder = (FastDecoder if cfg.fast_decoder else Decoder)(cfg)  # same parameters
        self.postnet = Postnet(
            cfg.n_mel_channels,
            cfg.postnet_embedding_dim,
            cfg.postnet_kernel_size,
            cfg.postnet_n_convolutions,
            cfg.postnet_dropout,
        )

    def encode(
        self, text: torch.Tensor, text_lengths: torch.Tensor, text_lengths_host: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """text [B, T_text] -> memory [B, T_text, enc_dim] and the attention mask bias [B, T_text].
        text_lengths_host: the same lengths on the CPU (the collate's), which spares the BiLSTM's
        packing a copy from the device; None copies them."""
        valid = _valid_mask(text_lengths, text.size(1))
        host = text_lengths.cpu() if text_lengths_host is None else text_lengths_host
        memory = self.encoder(
            self.embedding(text).transpose(1, 2), host, valid.unsqueeze(1).to(self.embedding.weight.dtype)
        )
        mask_bias = torch.zeros(valid.shape, dtype=memory.dtype, device=memory.device)
        return memory, mask_bias.masked_fill_(~valid, float("-inf"))

    def forward(self, batch: Batch, shape: LoopShape | None = None) -> Tacotron2Output:
        """Teacher-forced pass over a Batch (model/batch.py): mel [B, n_mels, T] zero-padded, T a
        multiple of n_frames_per_step.

        A packed batch (BLoad blocks: batch.packing) has text [N, T_text] and text_lengths,
        mel_lengths [N] per utterance, mel [R, n_mels, T] per block; outputs are per block,
        alignments over the blocks' concatenated text axes [R, T / r, packing.n_text].
        With a shape (model/shapes.py) the decoder loop runs that bigger, padded shape, through the
        fast decoder's loop hook if one is set (FastDecoder.loop_hook); the outputs are the same.
        """
        r = self.cfg.n_frames_per_step
        if batch.mel.size(2) % r:
            raise ValueError(f"mel has {batch.mel.size(2)} frames, not a multiple of n_frames_per_step={r}")
        if shape is not None and (batch.packing is not None or not isinstance(self.decoder, FastDecoder)):
            raise ValueError("a decoder loop shape (graph_bucket) needs fast_decoder=true and unpacked batches")
        if batch.packing is not None:
            return self._forward_packed(batch)
        memory, mask_bias = self.encode(batch.text, batch.text_lengths, batch.text_lengths_host)
        if shape is None:
            mel_out, gate, alignments = self.decoder(memory, mask_bias, batch.mel)
        else:  # the loop runs the padded shape (model/fast_decoder.py); the results are the batch's
            mel_out, gate, alignments = self.decoder(memory, mask_bias, batch.mel, shape=shape)
        valid = _valid_mask(batch.mel_lengths, batch.mel.size(2))
        mel_out, mel_postnet = self._postnet(mel_out, valid)
        steps_valid = _valid_mask(ceil_div(batch.mel_lengths, r), alignments.size(1))
        return Tacotron2Output(
            mel_out,
            mel_postnet,
            gate.masked_fill(~valid, GATE_PAD_LOGIT),
            alignments.masked_fill(~steps_valid.unsqueeze(2), 0.0),
        )

    def _forward_packed(self, batch: Batch) -> Tacotron2Output:
        text_lengths, mel, mel_lengths, packing = batch.text_lengths, batch.mel, batch.mel_lengths, batch.packing
        rows, n_mels, frames = mel.shape
        r = self.cfg.n_frames_per_step
        # per utterance: no neighbour in reach
        memory_utt, _ = self.encode(batch.text, text_lengths, batch.text_lengths_host)
        memory = scatter_text(memory_utt, text_lengths, packing, rows)
        layout = step_layout(packing, mel_lengths, rows, frames // r, r)
        mask_bias = step_mask_bias(packing, layout, text_lengths, memory.dtype)
        mel_out, gate, alignments = self.decoder(memory, mask_bias, mel, layout)
        # Postnet per utterance: gather each one's frames into a padded batch, scatter back.
        # Fixed-size index grids (packing.frame_index): no boolean selection, so no host sync on a GPU.
        index, valid_utt = packing.frame_index(mel_lengths, frames, width=frames)  # a block bounds every utterance
        frame_valid = positions_mask(index, valid_utt, rows * frames).view(rows, frames)
        mel_out = mel_out.masked_fill(~frame_valid.unsqueeze(1), 0.0)
        utt = gather_utterances(mel_out.transpose(1, 2).reshape(rows * frames, n_mels), index, valid_utt)
        _, post_utt = self._postnet(utt.transpose(1, 2), valid_utt)
        post = scatter_utterances(post_utt.transpose(1, 2), index, valid_utt, rows * frames)
        mel_postnet = post.view(rows, frames, n_mels).transpose(1, 2)
        return Tacotron2Output(
            mel_out,
            mel_postnet,
            gate.masked_fill(~frame_valid, GATE_PAD_LOGIT),
            alignments.masked_fill(~layout.real.unsqueeze(2), 0.0),
        )

    @torch.no_grad()
    def inference(self, text: torch.Tensor, text_lengths: torch.Tensor | None = None) -> Tacotron2Inference:
        """Synthesise until the gate says stop. text [B, T_text]; text_lengths defaults to T_text.

        Call .eval() first (the prenet keeps its dropout regardless). An item's length is one past
        its first frame with sigmoid(gate) > gate_threshold; the outputs end at the longest item.
        Warns on reaching max_decoder_steps.
        """
        if text_lengths is None:
            text_lengths = torch.full((text.size(0),), text.size(1), dtype=torch.long, device=text.device)
        memory, mask_bias = self.encode(text, text_lengths)
        mel, gate, alignments, lengths = self.decoder.inference(
            memory, mask_bias, self.cfg.max_decoder_steps, self.cfg.gate_threshold
        )
        mel, gate = mel[:, :, : int(lengths.max())], gate[:, : int(lengths.max())]
        valid = _valid_mask(lengths, mel.size(2))
        _, mel_postnet = self._postnet(mel, valid)
        return Tacotron2Inference(mel_postnet, gate.masked_fill(~valid, GATE_PAD_LOGIT), alignments)

    def _postnet(self, mel: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero the padded frames, then add the postnet residual and zero them again."""
        pad = ~valid.unsqueeze(1)
        mel = mel.masked_fill(pad, 0.0)
        residual = self.postnet(mel, valid.unsqueeze(1).to(mel.dtype))
        return mel, (mel + residual).masked_fill(pad, 0.0)


def _valid_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """[B, max_len] bool, True at positions < length."""
    return torch.arange(max_len, device=lengths.device) < lengths.unsqueeze(1)
