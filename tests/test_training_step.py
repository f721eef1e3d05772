"""training/step.py's precision settings, on the CPU: matmul_precision=highest also turns cuDNN's
TF32 off; under autocast the encoder's BiLSTM stays in fp32; under the fp16 gradient scaler an
overflow skip is not a bad step (only a non-finite loss is), so the scaler's normal start-up
cannot reach max_bad_steps."""

import dataclasses

import pytest
import torch

from model import Tacotron2
from tests.kit import make_batch, step_parts_and_batches, tiny_config
from training.config import AMP_MODES
from training.device_sums import DeviceSums
from training.step import AMP_DTYPES, set_matmul_precision, train_step


def test_every_amp_mode_of_the_settings_has_its_autocast_dtype():
    assert tuple(AMP_DTYPES) == AMP_MODES


@pytest.mark.parametrize("precision, tf32", [("highest", False), ("high", True), ("medium", True)])
def test_matmul_precision_sets_cudnn_tf32_too(precision, tf32):
    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    try:
        set_matmul_precision(precision)
        assert torch.get_float32_matmul_precision() == precision and torch.backends.cudnn.allow_tf32 is tf32
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]


def test_the_encoder_bilstm_runs_in_fp32_under_bf16_autocast():
    model = Tacotron2(tiny_config(n_frames_per_step=2))
    seen = []
    model.encoder.lstm.register_forward_hook(
        lambda module, args, out: seen.append((args[0].data.dtype, out[0].data.dtype))
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(make_batch([4, 7], [9, 13], 2))
    assert seen == [(torch.float32, torch.float32)]


def test_an_overflow_skip_under_the_scaler_is_not_a_bad_step():
    """DeviceSums counts `bad` toward max_bad_steps and `skipped` as skipped: a step skipped with a
    finite loss (fp16 overflow) leaves the run of bad steps at 0."""
    parts, (batch, *_) = step_parts_and_batches()
    result = train_step(parts, batch)
    assert float(result.bad) == float(result.skipped) == 0.0  # no scaler: bad is skipped
    overflow = dataclasses.replace(result, skipped=torch.tensor(1.0), bad=torch.tensor(0.0))
    sums = DeviceSums.for_epoch({}, torch.device("cpu"))
    for _ in range(3):
        sums.add(overflow)
    sums.start_copy()
    assert {k: sums.read()[k] for k in ("steps", "skipped", "bad_in_row")} == {
        "steps": 0,
        "skipped": 3,
        "bad_in_row": 0,
    }
    sums.add(dataclasses.replace(overflow, bad=torch.tensor(1.0)))
    sums.start_copy()
    assert sums.read()["bad_in_row"] == 1
