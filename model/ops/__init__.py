"""The fast decoder loop's GPU operations, each with its autograd node and its plain reference beside
it; the model calls them through small faces (model/fast_steps.py, model/fast_decoder.py).

* deferred.py: the deferred-gradient nodes (StepProjection's weights, DeferredMemory, the routed
  output stacks): each parameter's and memory's gradient once per batch, after the loop.
* attention_step.py: one step's attention as two PyTorch operators, their fake kernels and one
  autograd node; its Triton kernels and their launchers in attention_kernels.py (the forward's, and
  the helpers both directions share) and attention_backward_kernels.py. Its plain reference
  is model/attention.py's energy chain (a layer with parameters: the model's, not here).
* lstm_cell.py: one step's LSTM cell, plain (plain_cell, lstm_update) and as two operators with one
  autograd node; its Triton kernels and launchers in lstm_kernels.py.
* lstm_split.py: the same cell's rival, its product on cuBLAS (deferred.step_linear) and its pointwise
  part as two operators with one autograd node; its Triton kernels in lstm_pointwise_kernels.py.
* kernel_math.py: the Triton helpers the kernel modules share; support.py: what the operations share
  without Triton (where the kernels run, the accumulation dtype).

This package imports nothing else of model/, so it can be rewritten, switched off or replaced without
editing Tacotron2's files; only its *kernels*.py and kernel_math.py import Triton, on first use (the
operators import their kernel module inside the call; a kernel module may import another's helpers):
the recipe runs where Triton is absent.
tests/test_architecture.py holds both rules.
"""

#: The launched Triton kernels, by the function names a profiler shows them under (scripts/bench/
#: kernel_times.py keeps them by name; tests/test_architecture.py holds the list to the kernel modules).
KERNELS = (
    "attention_energies_kernel",
    "attention_context_kernel",
    "attention_chain_backward_kernel",
    "attention_filter_backward_kernel",
    "lstm_forward_kernel",
    "lstm_backward_inputs_kernel",
    "lstm_pointwise_forward_kernel",
    "lstm_pointwise_backward_kernel",
)
