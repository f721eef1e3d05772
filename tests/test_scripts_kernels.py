"""scripts/bench/kernels.py: the fused decoder step's Triton kernels compile for a Hopper GPU (sm_90) on
this GPU-less machine, with the Triton the GPU image runs, and at the sizes the model launches them
with their loops' loads are pipelined (LDGSTS, cp.async, or TMA in the SASS: every kernel but the LSTM
backward's pointwise one walks memory in a loop; the LSTM loops load nothing unpipelined) and they fit
the registers: none spills (the attention's backward spilled 448 bytes a thread in float32 and 424 with
bf16 inputs before its memory walks took every column and its chain walk stopped reading back its sums:
docs/results.md); and its prediction of a decoder step's time (scripts/bench/kernel_model.py), in both
designs of the LSTM cells (fused and split) and each precision group, checked by hand on made-up
kernels and machines, with the launches' bytes, the report's tables and the measured figures it reads."""

import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest

from scripts.bench.kernel_launches import DESIGNS, fits, launch_bytes, loops, step_launches, traffic
from scripts.bench.kernel_model import (
    GROUPS,
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
from scripts.bench.kernel_operations import predict_operation, step_operations
from scripts.bench.kernel_plan import plan, precision_notes
from scripts.bench.kernel_report import (
    MEASURED_COLUMNS,
    OPERATION_COLUMNS,
    PREDICTION_COLUMNS,
    ROWS,
    Planned,
    measured_table,
    prediction_table,
    read_measured,
    step_lines,
)
from scripts.bench.kernel_variants import default_variants, row_shares
from scripts.bench.kernels import COLUMNS, SIZES, main, sass_figures
from scripts.common import markdown_tables
from tests.kit import REPO
from tests.test_model_fast_decoder import OPS_PER_STEP as FUSED_OPS
from tests.test_model_ops_lstm_split import OPS_PER_STEP as SPLIT_OPS

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
    # a loop with its own stages (the attention backward's chain walk: 2, one iteration ahead) waits each
    own = Launch(programs=8, bytes=0, loops=(Loop(trips=9, stages=2), Loop(trips=3)), outside=0, stages=3)
    assert round_trips(own, compiled) == 9 + 3
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
    fused, split = step_launches(SIZES, "fused"), step_launches(SIZES, "split")
    assert [s.kernel for s in fused].count("lstm_forward_kernel") == 2 and len(fused) == 10 and len(split) == 8
    variants = default_variants()
    assert {v.fn.__name__ for v in variants} == {s.kernel for s in fused + split}  # every launch compiled
    for v in variants:
        for step in (s for s in fused + split if s.kernel == v.fn.__name__):
            moved = traffic(step, SIZES, 16, {**v.constexprs, **row_shares(v.fn, 16)})
            assert set(moved) == {a for a in v.fn.arg_names if a.endswith("_ptr")}, step
    decoder = next(s for s in fused if s.label == "lstm forward, decoder cell")
    assert decoder.widths == (SIZES.attention_hidden, SIZES.memory, SIZES.decoder_hidden)
    attention = next(s for s in fused if s.label == "lstm forward, attention cell")
    assert fits(decoder, {"NPARTS": 3}, {}) and not fits(attention, {"NPARTS": 3}, {})  # it borrows the decoder cell's
    # the loops' iterations from the modules' blocks: the attention cell's forward, compiled for three
    # inputs, walks its two and none of the third; the inputs' product walks the 4H gate columns
    blocks = {v.fn.__name__: v.constexprs for v in variants}
    bk, bj = blocks["lstm_forward_kernel"]["BK"], blocks["lstm_backward_inputs_kernel"]["BJ"]
    inner, _ = loops(attention, SIZES, blocks["lstm_forward_kernel"])
    assert [loop.trips for loop in inner] == [-(-512 // bk), -(-1024 // bk), 0]
    inputs = next(s for s in fused if s.label == "lstm backward inputs, decoder cell")
    assert [loop.trips for loop in loops(inputs, SIZES, blocks["lstm_backward_inputs_kernel"])[0]] == [-(-4096 // bj)]
    consts = {"HAS_KEEP": True}
    fp32 = launch_bytes(decoder, SIZES, 16, consts, {})
    bf16 = launch_bytes(decoder, SIZES, 16, consts, {"w_ptr": "bf16", "row_ptr": "bf16"})
    k = decoder.width
    assert fp32 - bf16 == 4 * decoder.hidden * k * 2 + 16 * k * 2


#: The launches that run inside the operation of the launch before them: each attention direction's
#: second, the fused cell backward's inputs' product.
SECOND_LAUNCHES = ("attention_context_kernel", "attention_filter_backward_kernel", "lstm_backward_inputs_kernel")


def test_the_launches_of_both_designs_are_the_operations_the_suite_counts():
    """The fused step: 3 + 5 operations, 12 launches (each attention direction and each cell's backward
    is one operation of two kernels) with its 2 additions; the split step with the fused attention:
    each operation a launch but the attention's, its Triton kernels and the operations without a
    compiled kernel (5 more casts under bf16)."""
    launched = {d: step_launches(SIZES, d) for d in DESIGNS}
    seconds = {d: sum(s.kernel in SECOND_LAUNCHES for s in launched[d]) for d in DESIGNS}
    assert len(launched["fused"]) == 10 and seconds == {"fused": 4, "split": 2}
    for group in GROUPS:
        ops = step_operations(SIZES, group)
        mine = {d: [op for op in ops if d in op.designs] for d in DESIGNS}
        assert len(launched["fused"]) + len(mine["fused"]) - seconds["fused"] == sum(FUSED_OPS["fast+fused"])
        assert len(launched["fused"]) + len(mine["fused"]) == 12
        variant = "fast+fused_attention+split" + ("+bf16" if group == "bf16" else "")
        assert len(launched["split"]) + len(mine["split"]) - seconds["split"] == sum(SPLIT_OPS[variant])
        assert sum(op.row_flops > 0 for op in mine["split"]) == 4  # a GEMM each way per cell


def test_a_cublas_gemm_is_its_bytes_or_its_flops_and_a_launch():
    gemm = next(op for op in step_operations(SIZES, "tf32x3") if op.label.startswith("cuBLAS GEMM forward, decoder"))
    k, n = 2560, 4096
    assert gemm.bytes(16) == 4 * (n * k + 16 * (k + 2 * n)) and gemm.row_flops == 2 * k * n
    half = next(op for op in step_operations(SIZES, "bf16") if op.label == gemm.label)
    assert half.bytes(16) * 2 == gemm.bytes(16)
    gpu = Gpu("test", 1e12, 2, 1e9, gemm_flops=(1e13, 1e14, 1e15))
    slow = predict_operation(gemm, 64, gpu, COSTS, "tf32x3")  # 1.34 GFLOP at 10 TFLOPS: compute-bound
    assert slow.bound == "compute" and slow.seconds == pytest.approx(64 * 2 * k * n / 1e13 + 2e-6)
    fast = predict_operation(gemm, 64, gpu, COSTS, "tf32")
    assert fast.bound == "bandwidth" and fast.seconds == pytest.approx(gemm.bytes(64) / 1e12 + 2e-6)


def fake_figures(v) -> dict:
    """A compiled variant's figures, made up (no compiling; the plan does not compare the loops, the
    prediction does)."""
    return {"REG": 64, "STACK": 0, "SHARED": 0, "LDGSTS": 1, "UTMALDG": 0, "loops": [(10, 0)]}


def test_each_group_plans_every_launch_and_says_which_kernels_borrow_tf32x3():
    variants = default_variants()
    labels = [v.kernel for v in variants]
    # the attention's energies and chain backward in 3 precisions, its filter backward in 3 at B0 16 and 64,
    # its context (no product) in 2 at B0 16 and 64; the LSTM's 4 kernels in 3 (products) or 2 (pointwise)
    assert len(labels) == 26 and all(v.default for v in variants)
    assert {
        "attention chain backward, tf32, chunk 16",
        "attention filter backward, bf16, chunk 16, B0 64",
        "attention context, fp32, B0 16",
        "lstm backward inputs, tf32x3",
        "lstm pointwise forward, bf16",
    } <= set(labels)
    planned, missing = plan([(v, fake_figures(v)) for v in variants], list(ROWS))
    assert not missing and {p.group for p in planned} == set(GROUPS)
    for group in GROUPS:
        mine = [p for p in planned if p.group == group]
        assert len(mine) == 12 and {p.designs for p in mine} == {("fused",), ("split",), ("fused", "split")}
    tf32 = {p.step.kernel: p.compiled_as for p in planned if p.group == "tf32"}
    assert tf32["attention_energies_kernel"] == "tf32" and tf32["lstm_pointwise_forward_kernel"] == "fp32"
    assert tf32["attention_context_kernel"] == "fp32"
    assert precision_notes(planned) == []  # the pointwise kernels and the context have no product
    # attention kernels compiled in fp32 only (no PRECISION constexpr): the tf32 group runs them, and says so
    plain = [
        (dataclasses.replace(v, kernel=v.kernel.replace("tf32x3", "fp32")), fake_figures(v))
        for v in variants
        if not (v.kernel.startswith("attention") and ", tf32," in v.kernel)
    ]
    planned, missing = plan(plain, list(ROWS))
    assert not missing and {p.compiled_as for p in planned if p.step.kernel.startswith("attention")} == {"fp32", "bf16"}
    (note,) = precision_notes(planned)
    assert note.startswith(
        "Note: in tf32 the rows of attention_energies_kernel, attention_chain_backward_kernel,"
        " attention_filter_backward_kernel are their fp32 variants"
    )
    # without the attention's bf16 variants, no bf16 prediction, said in words
    kept = [(v, fake_figures(v)) for v in variants if not (v.kernel.startswith("attention") and "bf16" in v.kernel)]
    planned, missing = plan(kept, list(ROWS))
    assert "bf16" not in {p.group for p in planned} and missing == [
        "no prediction in bf16: no default variant of attention_energies_kernel, attention_context_kernel,"
        " attention_chain_backward_kernel, attention_filter_backward_kernel compiled"
    ]


def test_the_attention_launches_split_their_rows_as_the_launchers_do_with_the_variant_of_their_rows():
    """At B0 16 and 64 every attention launch runs 128 programs (one wave on 132 SMs): text slices of 24 and
    96 symbols, the context's 64 and 256 columns; the loops' iterations follow the shares (the author's
    figures for the full model); the context and filter backward use the variant compiled at their B0."""
    variants = default_variants()
    made_up = [(v, {**fake_figures(v), "REG": v.constexprs.get("DC", v.constexprs.get("BMC", 64))}) for v in variants]
    planned, _ = plan(made_up, list(ROWS))
    mine = {p.step.kernel: p for p in planned if p.group == "tf32x3"}
    trips = {
        "attention_energies_kernel": {16: [16, 2], 64: [16, 6]},
        "attention_context_kernel": {16: [3], 64: [12]},
        "attention_chain_backward_kernel": {16: [2, 2], 64: [6, 6]},
        "attention_filter_backward_kernel": {16: [8, 2, 12, 4, 2], 64: [2, 8, 12, 8, 6]},
    }
    for kernel, by_rows in trips.items():
        for rows, expected in by_rows.items():
            launch = mine[kernel].launches[rows]
            assert launch.programs == 128 and [loop.trips for loop in launch.loops] == expected, (kernel, rows)
    assert mine["attention_chain_backward_kernel"].launches[16].loops[1].stages == 2  # CHAIN_STAGES
    assert {r: mine["attention_filter_backward_kernel"].compiled[r].registers for r in ROWS} == {16: 16, 64: 64}
    assert {r: mine["attention_context_kernel"].compiled[r].registers for r in ROWS} == {16: 64, 64: 256}
    filter_fn = next(v.fn for v in variants if v.fn.__name__ == "attention_filter_backward_kernel")
    assert row_shares(filter_fn, 16) == {"SLICE": 24, "DC": 16, "HIDDEN_SLICE": 128, "G_ROWS": 64}
    assert row_shares(filter_fn, 64) == {"SLICE": 96, "DC": 64, "HIDDEN_SLICE": 512, "G_ROWS": 128}


def planned_made_up() -> list[Planned]:
    """The attention's two forward launches with made-up figures in tf32x3, at the report's rows and at 32."""
    compiled = Compiled(warps=4, registers=32, shared=0, pipelined=True, loops=((10, 0),))
    made = []
    for step in step_launches(SIZES)[:2]:
        launches = {r: Launch(r, 1000 * r, (Loop(trips=4),), 1, 3) for r in (*ROWS, 32)}
        made.append(Planned(step, "tf32x3", "fp32", ("fused", "split"), dict.fromkeys(launches, compiled), launches))
    return made


def test_the_prediction_tables_parse_and_say_the_step(tmp_path):
    planned = planned_made_up()
    (table,) = markdown_tables("\n".join(prediction_table(planned, COSTS)))
    rows = parse(table, PREDICTION_COLUMNS)
    assert [r["launch"] for r in rows] == ["attention energies", "attention context"]
    assert all(float(r[f"us H100, B0 {b}"]) > 0 and r[f"programs, B0 {b}"] == str(b) for r in rows for b in ROWS)
    lines = step_lines(planned, SIZES, COSTS)
    assert lines[0].startswith("Predicted ms per decoder step, tf32x3, fused vs split: H100 ")
    assert re.search(r"H100 [0-9.]+ vs [0-9.]+ ms at B0 16", lines[0]) and "Targets: at most 0.15 ms" in lines[-1]
    path = tmp_path / "kernels.json"
    timed = {"attention_energies_kernel": {"us_per_decoder_step": 12.5, "calls_per_decoder_step": 1}}
    path.write_text(json.dumps({"device": "NVIDIA H200", "b0": 32, "precision": "fp32", "kernels": timed}))
    measured = read_measured(str(path))
    assert measured.gpu.name == "H200" and measured.kernels == {"attention_energies_kernel": (12.5, 1)}
    head, *rest = measured_table(planned, measured, COSTS)
    (table,) = markdown_tables("\n".join(rest))
    rows = {r["kernel"]: r for r in parse(table, MEASURED_COLUMNS)}
    assert (
        head.startswith("Measured on NVIDIA H200, B0 32")
        and rows["attention_energies_kernel"]["us per step, measured"] == "12.5"
    )
    assert rows["attention_context_kernel"]["us per step, measured"] == "-"
    total = rows["total, the kernels both have"]
    assert (
        total["us per step, measured"] == "12.5"
        and total["us per step, predicted"] == rows["attention_energies_kernel"]["us per step, predicted"]
    )
    assert head.endswith("(predicted: H200, tf32x3, the fused design)")
    # bench.step's kernel_times names its variant and precision: a split step in TF32
    path.write_text(json.dumps({**json.loads(path.read_text()), "precision": "tf32", "variant": "graphed+split"}))
    head, *_ = measured_table(planned, read_measured(str(path)), COSTS)
    assert head.endswith("(predicted: H200, tf32, the split design)")


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
    table, prediction, operations, compared = markdown_tables(out)
    rows = parse(table, COLUMNS)
    # the attention's energies and chain backward, the LSTM forward and the backward's inputs' product, each in
    # tf32x3, tf32 and bf16, the attention's filter backward in those at B0 16 and 64; the attention's context
    # at B0 16 and 64 and the LSTM pointwise forward and backward (no product) in fp32 and bf16
    assert len(rows) == 26 and all(row["kernel"].endswith("(default)") for row in rows)
    for row in rows:
        name, spilled = row["kernel"], int(row["stack bytes (spills)"])
        assert 0 < int(row["registers"]) <= 255, row
        if name.startswith("lstm pointwise"):  # one tile a program: no loop to pipeline
            assert not row[COLUMNS[-1]], row
            continue
        assert int(row["shared bytes"]) > 0, row
        assert int(row["LDGSTS"]) + int(row["UTMALDG"]) > 0, row  # some loop's loads are issued ahead
        assert row[COLUMNS[-1]], row
        assert name.startswith("attention") or "LDG)" not in row[COLUMNS[-1]].replace("(0 LDG)", ""), row
        assert spilled == 0, (name, spilled)
    # each Triton launch of either design in the three groups, every figure positive (the loops the SASS's: exit 0)
    predicted = parse(prediction, PREDICTION_COLUMNS)
    assert len(predicted) == 36 and all(float(r[c]) > 0 for r in predicted for c in PREDICTION_COLUMNS[3:-1])
    assert "Note:" not in out  # every kernel with products runs them in each group's own precision
    others = parse(operations, OPERATION_COLUMNS)
    assert sum(r["operation"].startswith("cuBLAS GEMM") for r in others) == 12
    assert all(float(r[c]) > 0 for r in others for c in OPERATION_COLUMNS[3:-1])
    steps = [line for line in out.splitlines() if line.startswith("Predicted ms per decoder step")]
    assert [line.split(",")[1].strip() for line in steps] == list(GROUPS)
    assert all(len(re.findall(r"[0-9.]+ vs [0-9.]+ ms at B0", line)) == 4 for line in steps)
    kernels = {r["kernel"]: r for r in parse(compared, MEASURED_COLUMNS)}
    assert (
        kernels["lstm_forward_kernel"]["calls per step, predicted"] == "2"
        and float(kernels["total, the kernels both have"]["us per step, predicted"]) > 0
    )
