"""Location-sensitive attention (Chorowski et al. 2015) as used by Tacotron2."""

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from .layers import linear


class LocationSensitiveAttention(nn.Module):
    """Additive attention whose energies also see where it attended before.

    The location features (a convolution over the previous and the cumulative attention weights,
    then a linear layer) are what push the alignment to move forward monotonically through the
    text. Both are linear without bias, so the decoder folds them into one matrix once per batch
    (`location_matrix`) and applies it per step as a single matmul on the unfolded weights instead of
    a tiny convolution call every step (one large kernel instead of two small ones).

    With `recompute` (Tacotron2Config.recompute_attention), a training step keeps only each step's
    inputs of the energy chain (location features, tanh, energies, softmax) and recomputes the chain
    in that step's backward, as Lingvo's `Recurrent` does: the [B, T_text, dim] tensors that the chain
    saves are most of the decoder loop's activation memory. The recomputation draws no random
    numbers, so the outputs and gradients are the same.
    """

    def __init__(
        self, query_dim: int, memory_dim: int, dim: int, n_filters: int, kernel_size: int, recompute: bool = False
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.recompute = recompute
        self.query_layer = linear(query_dim, dim, bias=False, gain="tanh")
        self.memory_layer = linear(memory_dim, dim, bias=False, gain="tanh")
        self.location_conv = nn.Conv1d(2, n_filters, kernel_size, padding=(kernel_size - 1) // 2, bias=False)
        nn.init.xavier_uniform_(self.location_conv.weight)
        self.location_dense = linear(n_filters, dim, bias=False, gain="tanh")
        self.v = linear(dim, 1, bias=False)

    def location_matrix(self) -> torch.Tensor:
        """location_dense(location_conv(.)) as one [2 * kernel_size, dim] matrix."""
        return self.location_conv.weight.flatten(1).t() @ self.location_dense.weight.t()

    def forward(
        self,
        query: torch.Tensor,
        memory: torch.Tensor,
        processed_memory: torch.Tensor,
        weights_cat: torch.Tensor,
        location_matrix: torch.Tensor,
        mask_bias: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One decoder step.

        query [B, query_dim]; memory [B, T_text, memory_dim]; processed_memory = memory_layer(memory)
        and location_matrix = location_matrix(), both computed once per batch by the caller;
        weights_cat [B, 2, T_text] (previous and cumulative weights); mask_bias [B, T_text], 0 at
        real symbols and -inf at padding. Returns the context [B, memory_dim] and weights [B, T_text].
        """
        return self.attend(self.query_layer(query), memory, processed_memory, weights_cat, location_matrix, mask_bias)

    def attend(
        self,
        processed_query: torch.Tensor,
        memory: torch.Tensor,
        processed_memory: torch.Tensor,
        weights_cat: torch.Tensor,
        location_matrix: torch.Tensor,
        mask_bias: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """forward after the query projection (processed_query [B, dim] = query_layer(query)), for a
        caller that projects the query itself (the fast loop's plain attention step, model/fast_steps.py)."""
        inputs = (processed_query, memory, processed_memory, weights_cat, location_matrix, mask_bias)
        if self.recompute and torch.is_grad_enabled():
            # No RNG state to restore (nothing random here), so no host read of it under CUDA graphs.
            return checkpoint(self.energy_chain, *inputs, use_reentrant=False, preserve_rng_state=False)
        return self.energy_chain(*inputs)

    def energy_chain(
        self,
        processed_query: torch.Tensor,
        memory: torch.Tensor,
        processed_memory: torch.Tensor,
        weights_cat: torch.Tensor,
        location_matrix: torch.Tensor,
        mask_bias: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The context and the weights from the projected query: what `recompute` recomputes."""
        b, _, t_text = weights_cat.shape
        half = (self.kernel_size - 1) // 2
        windows = F.pad(weights_cat, (half, half)).unfold(2, self.kernel_size, 1)  # [B, 2, T, K]
        location = windows.transpose(1, 2).reshape(b, t_text, -1) @ location_matrix
        hidden = torch.tanh(processed_query.unsqueeze(1) + location + processed_memory)
        energies = self.v(hidden).squeeze(2) + mask_bias
        weights = torch.softmax(energies, dim=1)
        context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)
        return context, weights
