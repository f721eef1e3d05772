"""scripts/bench/kernels.py: the fused decoder step's Triton kernels compile for a Hopper GPU (sm_90) on
this GPU-less machine, with the Triton the GPU image runs, and at the sizes the model launches them
with their loops' loads are pipelined (LDGSTS, cp.async, or TMA in the SASS: every kernel walks memory
in a loop) and they fit the registers: none spills (the attention's backward spilled 448 bytes a thread
in float32 and 424 with bf16 inputs before its memory walks took every column and its chain walk
stopped reading back its sums: docs/results.md)."""

import os
import subprocess
import sys

import pytest

from scripts.bench.kernels import COLUMNS, sass_figures
from scripts.common import markdown_tables
from tests.kit import REPO

#: A made-up SASS listing as `cuobjdump -sass` prints it: a two-instruction loop with a plain load inside
#: a six-instruction one (back branches at 0x40 and 0x60), a cp.async and a TMA load, the closing self-branch.
SASS = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;                /* 0x00000a00ff017b82 */
        /*0010*/              @!P1 LDGSTS.E.BYPASS.128 [R3], desc[UR8][R4.64] ;
        /*0020*/                   UTMALDG.2D [UR8], [UR4] ;
        /*0030*/                   LDG.E R2, desc[UR8][R4.64] ;
        /*0040*/               @P0 BRA 0x30 ;
        /*0050*/                   IADD3 R5, R5, 0x1, RZ ;
        /*0060*/              @!P2 BRA 0x10 ;
        /*0070*/                   EXIT ;
        /*0080*/                   BRA 0x80;
"""


def test_the_sass_reader_counts_pipelined_loads_and_innermost_loops():
    assert sass_figures(SASS) == {"LDGSTS": 1, "UTMALDG": 1, "loops": [(2, 1)]}


@pytest.mark.slow
def test_the_kernels_compile_for_hopper_fit_the_registers_and_pipeline_their_loads(tmp_path):
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
    assert [c.strip() for c in table[0].split("|")[1:-1]] == COLUMNS
    rows = [dict(zip(COLUMNS, (c.strip() for c in r.split("|")[1:-1]), strict=True)) for r in table[2:]]
    assert len(rows) == 8 and all(row["kernel"].endswith("(default)") for row in rows)
    for row in rows:
        name, spilled = row["kernel"], int(row["stack bytes (spills)"])
        assert 0 < int(row["registers"]) <= 255 and int(row["shared bytes"]) > 0, row
        assert int(row["LDGSTS"]) + int(row["UTMALDG"]) > 0, row  # some loop's loads are issued ahead
        assert row[COLUMNS[-1]], row
        assert spilled == 0, (name, spilled)
