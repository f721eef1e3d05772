"""Building blocks of Tacotron2: Xavier-initialised layers, the encoder, the prenet and the postnet."""

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def linear(n_in: int, n_out: int, bias: bool = True, gain: str = "linear") -> nn.Linear:
    """A Linear with Xavier-uniform weights scaled for the nonlinearity that follows it."""
    layer = nn.Linear(n_in, n_out, bias=bias)
    nn.init.xavier_uniform_(layer.weight, gain=nn.init.calculate_gain(gain))
    return layer


def conv1d(n_in: int, n_out: int, kernel_size: int, bias: bool = True, gain: str = "linear") -> nn.Conv1d:
    """A same-length Conv1d (odd kernel) with Xavier-uniform weights."""
    layer = nn.Conv1d(n_in, n_out, kernel_size, padding=(kernel_size - 1) // 2, bias=bias)
    nn.init.xavier_uniform_(layer.weight, gain=nn.init.calculate_gain(gain))
    return layer


class MaskedBatchNorm1d(nn.BatchNorm1d):
    """BatchNorm1d whose training statistics come from the real positions only.

    NVIDIA's recipe normalises over padded positions too, so the statistics (and the running
    averages used at validation) shift with how much padding a batch holds, i.e. with the
    batching strategy under test. Here they do not; eval mode is plain BatchNorm1d.
    """

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """x [B, C, T]; valid [B, 1, T] with 1 at real positions."""
        if not self.training:
            return super().forward(x)
        dtype, x, valid = x.dtype, x.float(), valid.float()  # statistics in fp32, also under autocast
        count = valid.sum()
        mean = (x * valid).sum((0, 2)) / count
        var = ((x - mean[:, None]).pow(2) * valid).sum((0, 2)) / count
        with torch.no_grad():
            self.running_mean.lerp_(mean.to(self.running_mean.dtype), self.momentum)
            self.running_var.lerp_((var * count / (count - 1).clamp(min=1)).to(self.running_var.dtype), self.momentum)
            self.num_batches_tracked += 1
        scale = self.weight.float() * torch.rsqrt(var + self.eps)
        return ((x - mean[:, None]) * scale[:, None] + self.bias.float()[:, None]).to(dtype)


class ConvBN(nn.Module):
    """Conv1d then BatchNorm1d over the real frames: the unit of the encoder and postnet stacks.

    The input's padded positions are zeroed first: BatchNorm's shift makes them nonzero after
    every layer, and the next kernel would carry that into the real positions near the end, so
    real outputs would depend on how much padding the batch happens to have.
    """

    def __init__(self, n_in: int, n_out: int, kernel_size: int, gain: str):
        super().__init__()
        self.conv = conv1d(n_in, n_out, kernel_size, gain=gain)
        self.norm = MaskedBatchNorm1d(n_out)

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """x [B, C, T]; valid [B, 1, T] with 1 at real positions."""
        return self.norm(self.conv(x * valid), valid)


class Encoder(nn.Module):
    """Convolutions over the symbol embeddings, then a BiLSTM over the real (unpadded) symbols."""

    def __init__(self, n_in: int, n_convolutions: int, dim: int, kernel_size: int, p: float):
        super().__init__()
        self.p = p
        sizes = [n_in] + [dim] * n_convolutions
        self.convolutions = nn.ModuleList(ConvBN(a, b, kernel_size, gain="relu") for a, b in zip(sizes[:-1], sizes[1:]))
        self.lstm = nn.LSTM(sizes[-1], dim // 2, batch_first=True, bidirectional=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """x [B, C, T_text], lengths [B] on the CPU, valid [B, 1, T_text] -> memory [B, T_text, dim].

        The rows are sorted by length here, from the CPU lengths, rather than by
        pack_padded_sequence(enforce_sorted=False), whose unpacking copies its device-side
        order back to the host and so waits for the device. The BiLSTM runs in fp32 under
        autocast: CUDA's autocast runs the cuDNN RNN in fp16 whatever the autocast dtype, which
        under bf16 would mean fp16 without loss scaling."""
        for conv in self.convolutions:
            x = F.dropout(F.relu(conv(x, valid)), self.p, self.training)
        order = torch.argsort(lengths, descending=True, stable=True)
        restore = torch.argsort(order)
        rows = x.transpose(1, 2).index_select(0, order.to(x.device, non_blocking=True))
        with torch.autocast(x.device.type, enabled=False):
            rows = rows.to(self.lstm.weight_ih_l0.dtype)  # the weights' dtype: fp32 (fp64 in float64 tests)
            out, _ = self.lstm(pack_padded_sequence(rows, lengths[order], batch_first=True))
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(2))
        return out.index_select(0, restore.to(x.device, non_blocking=True))


class Prenet(nn.Module):
    """Two ReLU layers whose dropout stays on at inference too.

    Tacotron2 relies on this always-on dropout as its only source of variation at synthesis
    time; with it off the autoregressive decoder tends to loop or stall.
    """

    def __init__(self, n_in: int, sizes: list[int], p: float):
        super().__init__()
        self.p = p
        dims = [n_in] + sizes
        self.layers = nn.ModuleList(linear(a, b, bias=False, gain="relu") for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.dropout(F.relu(layer(x)), self.p, training=True)
        return x


class Postnet(nn.Module):
    """Convolutions predicting a residual that refines the decoder's mel (tanh except the last)."""

    def __init__(self, n_mels: int, dim: int, kernel_size: int, n_convolutions: int, p: float):
        super().__init__()
        self.p = p
        sizes = [n_mels] + [dim] * (n_convolutions - 1) + [n_mels]
        gains = ["tanh"] * (n_convolutions - 1) + ["linear"]
        self.convolutions = nn.ModuleList(
            ConvBN(a, b, kernel_size, gain=g) for a, b, g in zip(sizes[:-1], sizes[1:], gains)
        )

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """x [B, n_mels, T]; valid [B, 1, T] with 1 at real frames."""
        last = len(self.convolutions) - 1
        for i, conv in enumerate(self.convolutions):
            x = conv(x, valid)
            if i < last:
                x = torch.tanh(x)
            x = F.dropout(x, self.p, self.training)
        return x
