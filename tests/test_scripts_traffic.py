"""scripts/bench/traffic.py: the bytes a decoder step moves, counted on the meta device.

The fast loop sums memory's gradient over all steps in one product after the loop
(model/ops/deferred.py's _DeferredMemory), so a step reads the encoder's memory once forward (the
context) and once backward (the weights' gradient) and writes nothing memory-sized; the reference loop
writes a memory-sized gradient every step and adds it to the sum (five passes backward). The
passes are read off the counts as the coefficient of rows x text x memory width."""

import itertools

import pytest

from scripts.bench.traffic import VARIANTS, line, main, step_traffic
from scripts.common import markdown_tables
from tests.kit import tiny_config
from tests.test_model_fast_decoder import OPS_PER_STEP

#: (forward, backward) passes over memory per decoder step
MEMORY_PASSES = {"plain": (1, 5), "fast": (1, 1), "fast+fused": (1, 1)}


def memory_passes(overrides: dict) -> tuple[float, float]:
    """The mixed third difference of a step's bytes in rows, text and memory width, over 4 bytes."""
    rows, text, widths = (2, 4), (6, 10), (8, 16)
    signs = {}
    for (i, r), (j, t), (k, m) in itertools.product(*(enumerate(x) for x in (rows, text, widths))):
        cfg = tiny_config(encoder_embedding_dim=m, **overrides)
        signs[(r, t, m)] = ((-1) ** (3 - i - j - k), step_traffic(cfg, r, t, steps=(2, 3)))
    scale = 4 * (rows[1] - rows[0]) * (text[1] - text[0]) * (widths[1] - widths[0])
    forward = sum(sign * s.bytes_forward for sign, s in signs.values()) / scale
    backward = sum(sign * s.bytes_backward for sign, s in signs.values()) / scale
    return forward, backward


@pytest.mark.parametrize("variant", list(MEMORY_PASSES))
def test_a_decoder_step_passes_over_memory_once_each_way_in_the_fast_loops(variant):
    assert memory_passes(VARIANTS[variant]) == MEMORY_PASSES[variant]


def test_the_fused_step_moves_less_per_utterance_than_the_fast_one_and_the_fixed_part_is_the_weights():
    fast, fused = (tiny_config(**VARIANTS[v]) for v in ("fast", "fast+fused"))
    (_, fast_fixed, fast_per_row), (step, fused_fixed, fused_per_row) = line(fast, 12), line(fused, 12)
    assert (step.ops_forward, step.ops_backward) == OPS_PER_STEP["fast+fused"]
    assert 0 < fused_per_row < 0.7 * fast_per_row
    # What does not grow with the batch is the loop's step weights (the prenet's columns are one product
    # before the loop), read forward and again backward, give or take a tenth
    cfg = fast
    floats = 4 * cfg.attention_rnn_dim * (cfg.encoder_embedding_dim + cfg.attention_rnn_dim)
    floats += 4 * cfg.decoder_rnn_dim * (cfg.attention_rnn_dim + cfg.encoder_embedding_dim + cfg.decoder_rnn_dim)
    floats += cfg.attention_dim * cfg.attention_rnn_dim
    for fixed in (fast_fixed, fused_fixed):
        assert abs(fixed - 2 * 4 * floats) < 0.1 * 2 * 4 * floats, (fixed, 2 * 4 * floats)


def test_the_report_prints_one_row_per_variant(capsys):
    assert main(["--variants", "fast+fused", "--text", "16"]) == 0
    (table,) = markdown_tables(capsys.readouterr().out)
    cells = [c.strip() for c in table[2].split("|")[1:-1]]
    assert cells[:2] == ["fast+fused", "{} + {}".format(*OPS_PER_STEP["fast+fused"])] and float(cells[4]) > 0
