"""scripts/bench/kernels.py: the fused decoder step's Triton kernels compile for a Hopper GPU (sm_90) on
this GPU-less machine, with the Triton the GPU image runs, and at the sizes the model launches them
with they fit the registers: no spill in either forward kernel nor in the LSTM's backward, and the
attention's backward spills under 1 KiB a thread (384 bytes when written: docs/results.md)."""

import os
import subprocess
import sys

import pytest

from scripts.common import markdown_tables
from tests.kit import REPO


@pytest.mark.slow
def test_the_kernels_compile_for_hopper_and_fit_the_registers(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile, do not interpret
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    out = subprocess.run(
        [sys.executable, "-m", "scripts.bench.kernels", "--defaults"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    (table,) = markdown_tables(out)
    rows = {
        cells[0]: [int(x) for x in cells[1:]] for cells in ([c.strip() for c in r.split("|")[1:-1]] for r in table[2:])
    }
    assert len(rows) == 8 and all(name.endswith("(default)") for name in rows)
    for name, (warps, registers, spilled, shared) in rows.items():
        assert 0 < registers <= 255 and shared > 0, name
        assert spilled == 0 or (name.startswith("attention backward") and spilled < 1024), (name, spilled)
