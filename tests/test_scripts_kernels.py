"""scripts/bench/kernels.py: the fused decoder step's Triton kernels compile for a Hopper GPU (sm_90) on
this GPU-less machine, with the Triton the GPU image runs, and at the sizes the model launches them
with their loops' loads are pipelined (LDGSTS, cp.async, or TMA in the SASS: every kernel but the LSTM
backward's pointwise one walks memory in a loop; the LSTM loops load nothing unpipelined) and they fit
the registers: none spills (the attention's backward spilled 448 bytes a thread in float32 and 424 with
bf16 inputs before its memory walks took every column and its chain walk stopped reading back its sums:
docs/results.md); and its prediction of a decoder step's time (scripts/bench/kernel_model.py), checked
by hand on made-up kernels and machines, with the launches' bytes, the report's tables and the measured
figures it reads."""

import json
import os
import re
import subprocess
import sys

import pytest

from scripts.bench.kernel_launches import fits, launch_bytes, loops, step_launches, traffic
from scripts.bench.kernel_model import (
    Compiled,
    Costs,
    Gpu,
    Launch,
    Loop,
    StructureError,
    predict,
    resident,
    round_trips,
)
from scripts.bench.kernel_report import (
    MEASURED_COLUMNS,
    PREDICTION_COLUMNS,
    ROWS,
    Planned,
    measured_table,
    prediction_table,
    read_measured,
    step_lines,
)
from scripts.bench.kernels import COLUMNS, SIZES, default_variants, main, sass_figures
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


#: A made-up machine with round figures: 1 TB/s, 2 SMs at 1 GHz; a round trip 1 us, a launch 2 us.
GPU = Gpu("test", 1e12, 2, 1e9)
COSTS = Costs(latency_s=1e-6, launch_s=2e-6)


def test_the_prediction_takes_the_largest_bound_and_adds_the_launch():
    # 64 registers x 32 threads = 8 units of 256 a warp, 2 warps: 65536 / 4096 = 16 programs an SM
    compiled = Compiled(warps=2, registers=64, shared=0, pipelined=True, loops=((100, 0), (10, 1)))
    loops = (Loop(trips=9), Loop(trips=3, passes=2, dependent=2, outer_wait=True))
    launch = Launch(programs=8, bytes=5_000_000, loops=loops, outside=1, stages=3)
    assert resident(compiled) == 16
    # pipelined: ceil(9 / (3 - 1)) = 5; plain loads: 2 passes x (3 x 2 + 1) = 14; 1 outside
    assert round_trips(launch, compiled) == 20
    p = predict(launch, compiled, GPU, COSTS)
    assert p.bandwidth_s == pytest.approx(5e-6)  # 5 MB at 1 TB/s
    assert p.latency_s == pytest.approx(20e-6)  # one wave: 8 programs <= 2 SMs x 16
    # 4 programs an SM x 2 warps x (100 x 9 + 10 x 3 x 2) instructions at 4 a cycle, 1 GHz
    assert p.issue_s == pytest.approx(4 * 2 * 960 / 4 / 1e9)
    assert p.bound == "latency" and p.seconds == pytest.approx(22e-6)


def test_few_warps_cannot_fill_the_issue_slots_and_shared_memory_makes_waves():
    one_warp = Compiled(warps=1, registers=32, shared=0, pipelined=False, loops=((3000, 1),))
    launch = Launch(programs=1, bytes=0, loops=(Loop(trips=50),), outside=0, stages=3)
    p = predict(launch, one_warp, GPU, COSTS)
    assert p.latency_s == pytest.approx(50e-6)  # not pipelined: a round trip an iteration
    assert p.issue_s == pytest.approx(3000 * 50 / 1 / 1e9)  # one warp issues one a cycle, not four
    assert p.bound == "issue" and p.seconds == pytest.approx(152e-6)
    # 100 KiB of shared memory: two programs an SM (228 KiB, 1 KiB reserved each); 5 programs on 2 SMs: 2 waves
    big = Compiled(warps=4, registers=32, shared=100 * 1024, pipelined=True, loops=((10, 0),))
    assert resident(big) == 2
    waves = Launch(programs=5, bytes=0, loops=(Loop(trips=4),), outside=1, stages=3)
    assert predict(waves, big, GPU, COSTS).latency_s == pytest.approx(2 * 3e-6)


def test_a_kernel_whose_loops_are_not_the_sass_ones_is_an_error():
    compiled = Compiled(warps=4, registers=32, shared=0, pipelined=True, loops=((10, 0), (10, 0)))
    launch = Launch(programs=1, bytes=0, loops=(Loop(trips=4),), outside=0, stages=3)
    with pytest.raises(StructureError, match="its SASS has 2 innermost loops"):
        predict(launch, compiled, GPU, COSTS, "k")


def test_the_step_launches_name_every_pointer_and_count_bf16_weights_at_half():
    launches = step_launches(SIZES)
    assert [s.kernel for s in launches].count("lstm_forward_kernel") == 2 and len(launches) == 6
    for v in default_variants():
        for step in (s for s in launches if s.kernel == v.fn.__name__):
            moved = traffic(step, SIZES, 16, v.constexprs)
            assert set(moved) == {a for a in v.fn.arg_names if a.endswith("_ptr")}, step
    decoder = next(s for s in launches if s.label == "lstm forward, decoder cell")
    assert decoder.widths == (SIZES.attention_hidden, SIZES.memory, SIZES.decoder_hidden)
    attention = next(s for s in launches if s.label == "lstm forward, attention cell")
    assert fits(decoder, {"NPARTS": 3}) and not fits(attention, {"NPARTS": 3})  # it borrows the decoder cell's
    # the attention cell's forward, compiled for three inputs, walks its two and none of the third
    assert [loop.trips for loop in loops(attention, SIZES, {"NPARTS": 3, "BK": 16})[0]] == [512 // 16, 1024 // 16, 0]
    consts = {"HAS_KEEP": True}
    fp32 = launch_bytes(decoder, SIZES, 16, consts, {})
    bf16 = launch_bytes(decoder, SIZES, 16, consts, {"w_ptr": "bf16", "row_ptr": "bf16"})
    k = decoder.width
    assert fp32 - bf16 == 4 * decoder.hidden * k * 2 + 16 * k * 2


def planned_made_up() -> list[Planned]:
    """Two launches of made-up figures in fp32, at the report's rows and at 32."""
    compiled = Compiled(warps=4, registers=32, shared=0, pipelined=True, loops=((10, 0),))
    made = []
    for step in step_launches(SIZES)[:2]:
        launches = {r: Launch(r, 1000 * r, (Loop(trips=4),), 1, 3) for r in (*ROWS, 32)}
        made.append(Planned(step, "fp32", compiled, launches))
    return made


def test_the_prediction_tables_parse_and_say_the_step(tmp_path):
    planned = planned_made_up()
    (table,) = markdown_tables("\n".join(prediction_table(planned, COSTS)))
    rows = parse(table, PREDICTION_COLUMNS)
    assert [r["launch"] for r in rows] == ["attention forward", "attention backward"]
    assert all(float(r[f"us H100, B0 {b}"]) > 0 and r[f"programs, B0 {b}"] == str(b) for r in rows for b in ROWS)
    lines = step_lines(planned, SIZES, COSTS)
    assert lines[0].startswith("Predicted ms per decoder step, fp32: H100 ") and "Targets: at most 0.15 ms" in lines[-1]
    path = tmp_path / "kernels.json"
    timed = {"attention_forward_kernel": {"us_per_decoder_step": 12.5, "calls_per_decoder_step": 1}}
    path.write_text(json.dumps({"device": "NVIDIA H200", "b0": 32, "precision": "fp32", "kernels": timed}))
    measured = read_measured(str(path))
    assert measured.gpu.name == "H200" and measured.kernels == {"attention_forward_kernel": (12.5, 1)}
    head, *rest = measured_table(planned, measured, COSTS)
    (table,) = markdown_tables("\n".join(rest))
    rows = {r["kernel"]: r for r in parse(table, MEASURED_COLUMNS)}
    assert (
        head.startswith("Measured on NVIDIA H200, B0 32")
        and rows["attention_forward_kernel"]["us per step, measured"] == "12.5"
    )
    assert rows["attention_backward_kernel"]["us per step, measured"] == "-"
    total = rows["total, the kernels both have"]
    assert (
        total["us per step, measured"] == "12.5"
        and total["us per step, predicted"] == rows["attention_forward_kernel"]["us per step, predicted"]
    )


@pytest.mark.parametrize(
    "text, says",
    [
        ("{", "not JSON"),
        ('{"device": "H100", "b0": 16, "precision": "fp32"}', "'kernels' must be a dict"),
        ('{"device": "H100", "b0": 0, "precision": "fp32", "kernels": {}}', "'b0' must be at least 1"),
        ('{"device": "A100", "b0": 16, "precision": "fp32", "kernels": {}}', "device 'A100' is not an H100 or H200"),
        (
            '{"device": "H100", "b0": 16, "precision": "fp32", "kernels": {"k": {"us_per_decoder_step": "1"}}}',
            "kernel 'k': 'us_per_decoder_step' must be a float",
        ),
    ],
)
def test_a_bad_measured_file_is_one_error_line_before_any_compiling(tmp_path, capsys, text, says):
    path = tmp_path / "kernels.json"
    path.write_text(text)
    assert main(["--defaults", "--measured", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --measured {path}") and says in err and err.count("\n") == 1


def parse(table: list[str], columns: list[str]) -> list[dict]:
    assert [c.strip() for c in table[0].split("|")[1:-1]] == columns
    return [dict(zip(columns, (c.strip() for c in r.split("|")[1:-1]), strict=True)) for r in table[2:]]


@pytest.mark.slow
def test_the_kernels_compile_for_hopper_fit_the_registers_pipeline_their_loads_and_predict_a_step(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile, do not interpret
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    measured = tmp_path / "kernels.json"
    timed = {"lstm_forward_kernel": {"us_per_decoder_step": 80.0, "calls_per_decoder_step": 2}}
    measured.write_text(
        json.dumps({"device": "NVIDIA H100 80GB HBM3", "b0": 16, "precision": "fp32", "kernels": timed})
    )
    out = subprocess.run(
        [sys.executable, "-m", "scripts.bench.kernels", "--defaults", "--measured", str(measured)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    table, prediction, compared = markdown_tables(out)
    rows = parse(table, COLUMNS)
    # attention: forward and backward, LSTM: forward and the backward's product, each in tf32x3, tf32
    # and bf16; the LSTM backward's gates (no product) in fp32 and bf16
    assert len(rows) == 14 and all(row["kernel"].endswith("(default)") for row in rows)
    for row in rows:
        name, spilled = row["kernel"], int(row["stack bytes (spills)"])
        assert 0 < int(row["registers"]) <= 255, row
        if name.startswith("lstm backward gates"):  # pointwise, one tile a program: no loop to pipeline
            assert not row[COLUMNS[-1]], row
            continue
        assert int(row["shared bytes"]) > 0, row
        assert int(row["LDGSTS"]) + int(row["UTMALDG"]) > 0, row  # some loop's loads are issued ahead
        assert row[COLUMNS[-1]], row
        assert name.startswith("attention") or "LDG)" not in row[COLUMNS[-1]].replace("(0 LDG)", ""), row
        assert spilled == 0, (name, spilled)
    # each launch of a step in both precisions, every figure positive (and the loops the SASS's: exit 0)
    predicted = parse(prediction, PREDICTION_COLUMNS)
    assert len(predicted) == 12 and all(float(r[c]) > 0 for r in predicted for c in PREDICTION_COLUMNS[2:-1])
    steps = [line for line in out.splitlines() if line.startswith("Predicted ms per decoder step")]
    assert len(steps) == 2 and all(float(x) > 0 for line in steps for x in re.findall(r"([0-9.]+) ms at B0", line))
    kernels = {r["kernel"]: r for r in parse(compared, MEASURED_COLUMNS)}
    assert (
        kernels["lstm_forward_kernel"]["calls per step, predicted"] == "2"
        and float(kernels["total, the kernels both have"]["us per step, predicted"]) > 0
    )
