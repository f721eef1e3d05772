"""What the test modules share, in one place (no test module imports from another): the checkout's
root, the tiny model (as train.py hparams and as a Tacotron2Config) with the batches and passes the
model tests run on it, one runner for commands (train.py, torchrun, `python -m batching`, the
scripts), and the demo corpus that conftest.py builds once per test session."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import torch
from hypothesis import strategies as st

from data.collate import PackedCollate
from model import Batch, Tacotron2, Tacotron2Config

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")

#: train.py hparams of the model the end-to-end runs train (seconds per epoch on the CPU; hparams.yaml).
TINY_MODEL = "model_preset=tiny"
#: A narrower one for single training steps (tests/test_training_step.py, tests/test_cuda.py).
SMALL_MODEL = "model_preset=micro"
#: Utterances of the demo corpus a tiny run trains on (32 train, 8 validation).
DEMO_UTTERANCES = 40
#: Symbols and mel channels of tiny_config's model.
N_SYMBOLS, N_MELS = 12, 6


@dataclass(frozen=True)
class DemoCorpus:
    """A demo corpus (wavs, filelists) and the mel cache beside it: `demo_dir` and `mel_cache_dir`, of
    `utterances` utterances."""

    demo_dir: Path
    mel_cache_dir: Path
    utterances: int = DEMO_UTTERANCES

    @property
    def hparams(self) -> str:
        return f"demo_dir={self.demo_dir},mel_cache_dir={self.mel_cache_dir}"


def build_demo_corpus(folder: Path, utterances: int = DEMO_UTTERANCES) -> DemoCorpus:
    """The corpus of tiny runs with its mels computed and its data check cached (train.py --check)."""
    import train

    corpus = DemoCorpus(folder / "demo", folder / "mels", utterances)
    hparams = tiny(folder, corpus=corpus)
    if train.main(["--check", "--hparams", hparams]) != 0:
        raise RuntimeError(f"train.py --check --hparams {hparams} failed: the demo corpus for the tests was not built")
    return corpus


@pytest.fixture(scope="session")
def demo_corpus(tmp_path_factory) -> DemoCorpus:
    """The tiny runs' 40-clip demo corpus with its mels and data check, built once per test session
    under pytest's tmp base (under pytest-xdist once per worker: half a second, less than workers
    waiting on a lock). Tests only read it (kit.tiny(tmp_path, extra, demo_corpus)): runs add at most
    cache entries of their own settings to its mel cache. Defined here rather than in conftest.py so
    that tests/test_cuda.py has it when scripts/release/gpu_check/ runs that file alone with --noconftest."""
    return build_demo_corpus(tmp_path_factory.mktemp("demo_corpus"))


def tiny(tmp_path: Path, extra: str = "", corpus: DemoCorpus | None = None) -> str:
    """hparams for a seconds-long run on a small demo corpus, its output under tmp_path; the
    paper's constant learning rate (the demo preset's warm-up would outlast such a run).
    `corpus`: a built one to read (the demo_corpus fixture), else train.py builds one under tmp_path."""
    where = corpus.hparams if corpus else f"demo_dir={tmp_path / 'demo'},mel_cache_dir={tmp_path / 'mels'}"
    base = (
        f"demo_utterances={corpus.utterances if corpus else DEMO_UTTERANCES},{where},"
        f"output_dir={tmp_path / 'run'},progress=false,num_workers=0,batch_size=4,val_batch_size=4,"
        f"validate_every=1,learning_rate=0.001,warmup_steps=0,device=cpu,{TINY_MODEL}"
    )
    return base + ("," + extra if extra else "")


def docs_recipe(page: str, heading: str) -> str:
    """The first Python block under `heading` of a page under docs/: the code a test runs exactly as the docs
    show it."""
    section = (REPO / "docs" / page).read_text().split(heading + "\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


#: Runs recipes one after another in one process (each `[script, *args]` of the JSON list argv[1],
#: as `python script args`; a recipe's sys.exit(0) ends only it), so that one torchrun start-up
#: serves several recipes. A recipe that ends its process group (accelerator.end_training) goes last.
RECIPES_IN_ONE_PROCESS = """import json, runpy, sys
for argv in json.loads(sys.argv[1]):
    sys.argv = argv
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
"""


def run_command(
    *args: str | Path,
    cwd: Path = REPO,
    env: Mapping[str, str] | None = None,
    timeout: float = 900,
    expect: int | None = 0,
) -> subprocess.CompletedProcess:
    """Run a command as a user would, on one torch thread with unbuffered output, in `env` (default:
    this process's environment). Unless `expect` is None, a different exit status (or the timeout)
    fails the test with the command and the tail of its stdout and stderr."""
    argv = [str(a) for a in args]
    env = {**(os.environ if env is None else env), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        pytest.fail(
            f"{' '.join(argv)} (in {cwd}) ran past {timeout:.0f} s\n" + _tails(err.stdout, err.stderr), pytrace=False
        )
    if expect is not None and done.returncode != expect:
        pytest.fail(
            f"{' '.join(argv)} (in {cwd}) exited {done.returncode}, expected {expect}\n"
            + _tails(done.stdout, done.stderr),
            pytrace=False,
        )
    return done


def _tail(out: str | bytes | None, keep: int) -> str:
    out = out.decode(errors="replace") if isinstance(out, bytes) else out or ""
    return out[-keep:]


def _tails(stdout: str | bytes | None, stderr: str | bytes | None, keep: int = 4000) -> str:
    return f"--- stdout (last {keep} characters) ---\n{_tail(stdout, keep)}\n--- stderr ---\n{_tail(stderr, keep)}"


def torchrun(n_procs: int, hparams: str, *extra: str, timeout: int = 240) -> subprocess.CompletedProcess:
    """train.py on n_procs CPU ranks under torchrun; fails the test unless it exits 0."""
    return run_command(
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={n_procs}",
        REPO / "train.py",
        "--hparams",
        hparams,
        *extra,
        timeout=timeout,
    )


def tiny_config(**overrides) -> Tacotron2Config:
    """A Tacotron2 of a few thousand parameters on N_SYMBOLS symbols and N_MELS mel channels."""
    dims = dict(
        n_symbols=N_SYMBOLS,
        symbols_embedding_dim=8,
        encoder_embedding_dim=8,
        encoder_kernel_size=3,
        n_mel_channels=N_MELS,
        attention_rnn_dim=16,
        decoder_rnn_dim=16,
        prenet_dim=8,
        attention_dim=8,
        attention_location_n_filters=4,
        attention_location_kernel_size=5,
        postnet_embedding_dim=8,
        postnet_kernel_size=3,
    )
    return Tacotron2Config(**{**dims, **overrides})


def tiny_model(seed: int = 0, **overrides) -> Tacotron2:
    torch.manual_seed(seed)
    return Tacotron2(tiny_config(**overrides))


def noise_mel(n_mel: int, g: torch.Generator) -> torch.Tensor:
    return torch.randn(N_MELS, n_mel, generator=g)


def sinusoid_mel(n_mel: int, g: torch.Generator) -> torch.Tensor:
    return torch.sin(0.3 * torch.arange(n_mel) + torch.rand(N_MELS, 1, generator=g) * 6)


def packed_batch(layout, r: int, seed: int, extra_frames: int, mel=noise_mel):
    """(items, packed Batch) of `layout`'s (row, text length, mel length) utterances for tiny_config,
    laid out back to back in their rows (each starting on a multiple of r), the block's end padded
    by extra_frames x r; `mel(n_mel, generator)` makes each utterance's spectrogram."""
    g = torch.Generator().manual_seed(seed)
    items, ends = [], {}
    for row, n_text, n_mel in layout:
        start = ends.get(row, 0)
        ends[row] = start + -(-n_mel // r) * r
        items.append((row, start, torch.randint(1, N_SYMBOLS, (n_text,), generator=g), mel(n_mel, g)))
    return items, PackedCollate(r, max(ends.values()) + extra_frames * r)(items)


def make_batch(text_lengths, mel_lengths, r=1, seed=0) -> Batch:
    """A zero-padded, unsorted batch for tiny_config like data/collate.py builds (T a multiple of r).

    The mels are smooth, learnable sinusoids (plus a little noise), not white noise.
    """
    g = torch.Generator().manual_seed(seed)
    b = len(text_lengths)
    t_text = max(text_lengths)
    t = -(-max(mel_lengths) // r) * r
    text = torch.randint(1, N_SYMBOLS, (b, t_text), generator=g)
    phase = torch.rand(b, N_MELS, 1, generator=g) * 6.0
    mel = torch.sin(0.4 * torch.arange(t) + phase) + 0.1 * torch.randn(b, N_MELS, t, generator=g)
    tl, ml = torch.tensor(text_lengths), torch.tensor(mel_lengths)
    text[torch.arange(t_text) >= tl[:, None]] = 0
    mel = mel * (torch.arange(t) < ml[:, None]).unsqueeze(1)
    return batch_of(text, tl, mel, ml)


def batch_of(
    text: torch.Tensor,
    text_lengths: torch.Tensor,
    mel: torch.Tensor,
    mel_lengths: torch.Tensor,
    gate: torch.Tensor | None = None,
) -> Batch:
    """A padded Batch of these tensors; the gate target, unless given, as the padding collate sets it
    (1.0 from each utterance's last frame on)."""
    if gate is None:
        gate = (torch.arange(mel.size(2), device=mel.device) >= mel_lengths[:, None] - 1).to(mel.dtype)
    return Batch(
        text=text,
        text_lengths=text_lengths,
        mel=mel,
        gate=gate,
        mel_lengths=mel_lengths,
        text_lengths_host=text_lengths.cpu(),
        frames=int(mel_lengths.sum()),
    )


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max().clamp(min=1.0))


def double(batch: Batch) -> Batch:
    """The batch with float64 mels and gate targets, for a float64 model."""
    return dataclasses.replace(batch, mel=batch.mel.double(), gate=batch.gate.double())


def float64_pass(cfg, state: dict, batch: Batch, shape=None, seed: int = 7, graphs=None, model=None):
    """Train-mode float64 forward (dropout seeded) and the backward of a random projection of
    every output; the outputs and every parameter's gradient. `model`: one already holding
    `state` (the one `graphs` were built on), else a new one."""
    if model is None:
        model = Tacotron2(cfg).double().train()
        model.load_state_dict(state)
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    with model.decoder.loop_hook(graphs.runner) if graphs else contextlib.nullcontext():
        out = model(double(batch), shape=shape)
    g = torch.Generator().manual_seed(3)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=torch.float64)).sum() for o in out)
    loss.backward()
    return out, {name: p.grad for name, p in model.named_parameters()}


def step_parts_and_batches(r: int = 2, extra: str = ""):
    """The training step's parts for SMALL_MODEL (with the train.py hparams `extra`) on the CPU, and
    three random batches of three."""
    from data.collate import TextMelCollate
    from training.config import resolve_config
    from training.hparams import load_hparams
    from training.step import build_step_parts

    hp = load_hparams(f"dataset=demo,{SMALL_MODEL}" + (f",{extra}" if extra else ""))
    cfg = resolve_config(hp)
    parts = build_step_parts(cfg.train, cfg.model, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    collate = TextMelCollate(cfg.model.n_frames_per_step)
    batches = [
        collate(
            [
                (torch.randint(1, 30, (n,), generator=g), torch.randn(80, m, generator=g))
                for n, m in ((9, 30), (14, 41), (6, 22))
            ]
        )
        for _ in range(3)
    ]
    return parts, batches


def check_demo_learns(tmp_path: Path, extra: str = "") -> list[dict]:
    """The README's demo, shrunk (160 utterances, 8 epochs, a narrower model): validation loss falls
    well under 60% of its first value and the teacher-forced alignment becomes diagonal. Returns the
    run's metrics records, for a caller's checks of its own on the same run."""
    import train
    from training.rundir import read_metrics

    hp = (
        f"demo_utterances=160,demo_dir={tmp_path / 'demo'},mel_cache_dir={tmp_path / 'mels'},"
        f"output_dir={tmp_path / 'run'},progress=false,epochs=8,batch_size=8,validate_every=1,"
        "model.symbols_embedding_dim=64,model.encoder_embedding_dim=64,model.attention_rnn_dim=128,"
        "model.decoder_rnn_dim=128,model.prenet_dim=64,model.postnet_embedding_dim=64" + extra
    )
    assert train.main(["--hparams", hp]) == 0
    records = read_metrics(tmp_path / "run")
    first, last3 = records[0], records[-3:]
    # Early validation losses are noisy (BatchNorm running statistics lag a fast-moving model), so
    # the end of training is judged by its best of the last three validations.
    assert min(r["val_loss_valid"] for r in last3) < 0.6 * first["val_loss_valid"]
    assert first["val_diagonality"] < 0.6 < 0.9 < max(r["val_diagonality"] for r in last3)
    return records


#: Lengths lists that break naive planners (hypothesis strategy).
AWKWARD = st.one_of(
    st.lists(st.integers(1, 1000), min_size=1, max_size=150),  # anything, down to one sample
    st.builds(lambda n, x: [x] * n, st.integers(1, 60), st.integers(1, 900)),  # all equal
    st.builds(lambda n, k: [5] * n + [10_000] * k, st.integers(0, 100), st.integers(1, 3)),  # long tail
)


def icefall_loop(
    make_sampler, make_loader, ids_of, epochs: int = 2, state: dict | None = None, stop: tuple[int, int] | None = None
) -> tuple[dict[int, list], dict | None]:
    """An icefall-shaped training loop: restore the sampler from `state` (if given), then call
    set_epoch at the top of every epoch. Returns ({epoch: ids trained}, the sampler's state saved
    after step `stop` = (epoch, step) with the steps trained as `consumed`, else None)."""
    sampler = make_sampler()
    if state is not None:
        sampler.load_state_dict(state)
    seen: dict[int, list] = {}
    for epoch in range(0 if state is None else state["epoch"], epochs):
        sampler.set_epoch(epoch)
        for step, batch in enumerate(make_loader(sampler)):
            seen.setdefault(epoch, []).extend(ids_of(batch))
            if (epoch, step) == stop:
                return seen, sampler.state_dict(consumed=step + 1)
    return seen, None


def xdist_share_sizes(n_items: int, workers: int) -> list[int]:
    """How many of n_items pytest-xdist's work-stealing scheduler first hands each worker: the i-th
    of n gets the remaining items // (n - i), in collection order."""
    sizes: list[int] = []
    for worker in range(workers):
        sizes.append((n_items - sum(sizes)) // (workers - worker))
    return sizes


def dealt_order(items: Sequence[T], workers: int, is_slow: Callable[[T], bool]) -> list[T]:
    """`items` reordered for `workers` pytest-xdist workers (conftest.py's
    pytest_collection_modifyitems): the slow ones dealt round-robin to the starts of the workers'
    first shares, each followed by a quick one, the quick ones after them in their own order."""
    slow = [item for item in items if is_slow(item)]
    quick = [item for item in items if not is_slow(item)]
    order: list[T] = []
    for worker, size in enumerate(xdist_share_sizes(len(items), workers)):
        share: list[T] = []
        for item in slow[worker::workers]:
            share += [item, *quick[:1]]
            del quick[:1]
        fill = max(0, size - len(share))
        order += share + quick[:fill]
        del quick[:fill]
    return order + quick


def _record_precision(launch, launched: list, *args, **kwargs):
    launched.append(kwargs["PRECISION"])
    return launch(*args, **kwargs)


class _PrecisionRecorder:
    """A Triton kernel whose launches record the PRECISION constexpr they are given."""

    def __init__(self, kernel, launched: list):
        self.kernel, self.launched = kernel, launched

    def __getitem__(self, grid):
        return functools.partial(_record_precision, self.kernel[grid], self.launched)


@contextlib.contextmanager
def record_precisions(monkeypatch, module: str, kernels: Sequence[str], matmul: str) -> Iterator[list]:
    """Under torch's float32 matmul precision `matmul`, the PRECISION constexpr of each launch of the
    named kernels of `module`, in order: the interpreter multiplies float32 exactly at any input
    precision, so a test checks the choice where it is made. The module is imported here (the kernel
    modules load on first use; tests do not import them)."""
    launched: list = []
    loaded = importlib.import_module(module)
    for name in kernels:
        monkeypatch.setattr(loaded, name, _PrecisionRecorder(getattr(loaded, name), launched))
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(matmul)
    try:
        yield launched
    finally:
        torch.set_float32_matmul_precision(previous)
