"""A decoder step's time on an H100 or H200 predicted from the compiler's output, without a GPU.

Why. The fused kernels have not run on a GPU, and a GPU is lent for minutes at a time: a kernel
design should be judged before it gets one. Per kernel launch the prediction is the largest of three
bounds, plus a launch cost:

* bandwidth: the bytes the launch moves (each tensor it reads or writes once; what it reads back
  twice) over the memory bandwidth;
* latency: the memory round trips that one program waits for one after the other (a loop whose
  loads are plain waits one per iteration; a pipelined one, whose loads are issued STAGES - 1
  iterations ahead, one per STAGES - 1 iterations), times the memory latency, once per wave of
  programs;
* issue: the innermost loops' instructions (per iteration, read from the SASS, times the
  iterations) of every warp of the programs that share an SM, at the SM's issue rate;

and per decoder step the sum over its launches (a launch whose kernel is not compiled here, a cuBLAS
GEMM, takes its floating-point operations at the GPU's peak as a fourth bound: kernel_operations.py).
docs/kernels.md states it with its constants'
sources and what it leaves out. Pure arithmetic on given figures: the compiling and the kernels'
structure are scripts/bench/kernels.py's and scripts/bench/kernel_launches.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The precision groups a step is predicted in, as torch's float32 matmul precision and autocast set
#: them: "tf32x3" (matmul_precision=highest, the recipe's default: the Triton kernels' float32
#: products as three TF32 products, cuBLAS's as plain float32), "tf32" (high: one TF32 product in
#: both) and "bf16" (autocast's bf16 operands, float32 sums).
GROUPS = ("tf32x3", "tf32", "bf16")


@dataclass(frozen=True)
class Gpu:
    name: str
    bandwidth: float  # bytes per second
    sms: int
    clock_hz: float
    #: dense peak floating-point operations per second of a GEMM in each precision group (GROUPS)
    gemm_flops: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def gemm_peak(self, group: str) -> float:
        return self.gemm_flops[GROUPS.index(group)]


#: The spec sheets' figures (NVIDIA H100 and H200 Tensor Core GPU datasheets, SXM forms): memory
#: bandwidth 3.35 TB/s (HBM3) and 4.8 TB/s (HBM3e), both the same GH100 chip with 132 SMs at a
#: 1980 MHz maximum boost clock; for both 67 TFLOPS float32 (no tensor cores: cuBLAS under
#: matmul_precision=highest), 989 TF32 and 1979 bf16 tensor-core TFLOPS with sparsity, half of it dense.
HOPPER_GEMM_FLOPS = (67e12, 989e12 / 2, 1979e12 / 2)
GPUS = (Gpu("H100", 3.35e12, 132, 1.98e9, HOPPER_GEMM_FLOPS), Gpu("H200", 4.8e12, 132, 1.98e9, HOPPER_GEMM_FLOPS))


@dataclass(frozen=True)
class Costs:
    """The two figures no spec sheet gives, both assumptions to be replaced by the first GPU
    measurement (bench.step's per-kernel timing; docs/kernels.md): a DRAM round trip as a program
    waits it (the 600-800 ns that the first estimate of the fused step used, from published Hopper
    pointer-chase microbenchmarks: Chips and Cheese, "Nvidia's H100: Funny L2, and Tons of
    Bandwidth", 2023; Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture",
    arXiv:2402.13499), and a kernel node's launch inside a replayed CUDA graph (the 2-3 us the same
    estimate used)."""

    latency_s: float = 700e-9
    launch_s: float = 2.5e-6


#: Warp instructions an SM issues per cycle: four schedulers, one per SM sub-partition, each one a
#: cycle (NVIDIA H100 Tensor Core GPU Architecture whitepaper).
ISSUE_PER_CYCLE = 4
#: What one Hopper SM holds (CUDA C++ Programming Guide, compute capability 9.0): 64 K 32-bit
#: registers (allocated 256 a warp at a time), 228 KiB of shared memory (1 KiB of it reserved per
#: block), 64 warps, 32 blocks.
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256
SHARED_PER_SM = 228 * 1024
SHARED_RESERVED = 1024
WARPS_PER_SM = 64
BLOCKS_PER_SM = 32


@dataclass(frozen=True)
class Loop:
    """One program's innermost loop: its iterations per pass, the passes (an enclosing loop's
    iterations), the round trips an iteration waits one after the other when its loads are plain,
    whether each pass also waits a round trip of its own (loads of the enclosing loop), and its
    iterations in flight where they are not the kernel's (0: the kernel's STAGES)."""

    trips: int
    passes: int = 1
    dependent: int = 1
    outer_wait: bool = False
    stages: int = 0


@dataclass(frozen=True)
class Compiled:
    """The compiler's figures of one kernel (scripts/bench/kernels.py reads them from the cubin)."""

    warps: int
    registers: int
    shared: int
    pipelined: bool  # LDGSTS (cp.async) or UTMALDG (TMA) in its SASS
    loops: tuple[tuple[int, int], ...]  # each innermost loop in code order: (instructions per iteration, plain LDG)


@dataclass(frozen=True)
class Launch:
    """One launch of a kernel at given sizes: its programs, the bytes it moves, its innermost loops
    (in the SASS's order), the round trips it waits outside them, its loops' stages."""

    programs: int
    bytes: int
    loops: tuple[Loop, ...]
    outside: int
    stages: int


@dataclass(frozen=True)
class Prediction:
    bandwidth_s: float
    latency_s: float
    issue_s: float
    launch_s: float
    compute_s: float = 0.0  # a cuBLAS GEMM's floating-point operations at the peak (kernel_operations.py)

    @property
    def seconds(self) -> float:
        return max(self.bandwidth_s, self.latency_s, self.issue_s, self.compute_s) + self.launch_s

    @property
    def bound(self) -> str:
        """The largest of the bounds, by name."""
        terms = {
            "bandwidth": self.bandwidth_s,
            "latency": self.latency_s,
            "issue": self.issue_s,
            "compute": self.compute_s,
        }
        return max(terms, key=terms.get)


def resident(compiled: Compiled) -> int:
    """Programs one SM holds at once: the fewest its registers, shared memory, warps and blocks allow."""
    per_warp = math.ceil(compiled.registers * 32 / REGISTER_UNIT) * REGISTER_UNIT
    limits = [
        REGISTERS_PER_SM // (per_warp * compiled.warps),
        WARPS_PER_SM // compiled.warps,
        BLOCKS_PER_SM,
    ]
    if compiled.shared:
        limits.append(SHARED_PER_SM // (compiled.shared + SHARED_RESERVED))
    return max(1, min(limits))


class StructureError(ValueError):
    """A kernel's loops as kernel_launches.py states them do not match its SASS."""


def check_loops(launch: Launch, compiled: Compiled, kernel: str) -> None:
    """The launch's loops are the SASS's: else the structure in kernel_launches.py is out of date."""
    if len(launch.loops) != len(compiled.loops):
        raise StructureError(
            f"{kernel}: its SASS has {len(compiled.loops)} innermost loops, scripts/bench/kernel_launches.py "
            f"describes {len(launch.loops)}: update that kernel's loops there"
        )


def round_trips(launch: Launch, compiled: Compiled) -> int:
    """The memory round trips one program waits one after the other: per loop, one per iteration (times
    its dependent ones) if it has plain loads or the kernel none pipelined, else one per STAGES - 1
    iterations (its own STAGES where it has them); one per pass where the enclosing loop waits too; and
    the ones outside the loops."""
    total = launch.outside
    for loop, (_, plain) in zip(launch.loops, compiled.loops, strict=True):
        waits = loop.trips * loop.dependent
        if compiled.pipelined and plain == 0:
            waits = math.ceil(waits / max(1, (loop.stages or launch.stages) - 1))
        total += loop.passes * (waits + loop.outer_wait)
    return total


def issue_seconds(launch: Launch, compiled: Compiled, gpu: Gpu) -> float:
    """The busiest SM's innermost-loop instructions (every warp of every program it runs) at its issue
    rate, which fewer than four resident warps cannot fill."""
    per_warp = sum(n * loop.trips * loop.passes for (n, _), loop in zip(compiled.loops, launch.loops, strict=True))
    per_sm = math.ceil(launch.programs / gpu.sms)
    warps_at_once = min(per_sm, resident(compiled)) * compiled.warps
    cycles = per_sm * compiled.warps * per_warp / min(ISSUE_PER_CYCLE, warps_at_once)
    return cycles / gpu.clock_hz


def predict(launch: Launch, compiled: Compiled, gpu: Gpu, costs: Costs, kernel: str = "kernel") -> Prediction:
    """The three bounds and the launch cost of one launch on `gpu`."""
    check_loops(launch, compiled, kernel)
    waves = math.ceil(launch.programs / (gpu.sms * resident(compiled)))
    return Prediction(
        bandwidth_s=launch.bytes / gpu.bandwidth,
        latency_s=waves * round_trips(launch, compiled) * costs.latency_s,
        issue_s=issue_seconds(launch, compiled, gpu),
        launch_s=costs.launch_s,
    )
