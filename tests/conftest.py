"""Shared fixtures: the demo corpus of the tiny runs, where the read-only reference data lives, skips
when it is absent, and guards that fail the run if a test writes into it or into the checkout
(runs/, corpora/, .cache/, files). Helpers that are not fixtures live in tests/kit.py."""

import os
import shutil
import warnings
from pathlib import Path

import pytest
import torch

# Without a GPU, Triton's kernels (model/ops/) run in its interpreter, on the CPU. It is
# read when a kernel is defined, and they are defined on first use, after this.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from data.shared import LJSPEECH_LENGTHS, LJSPEECH_MINI, SHARED_DIR
from tests.kit import REPO, dealt_order, demo_corpus  # noqa: F401  (the session fixture, defined in the kit)
from tests.shared_guard import checkout_state, damaged, differences, read_sums, snapshot

SHARED = SHARED_DIR


@pytest.fixture
def ljspeech_lengths_tsv() -> Path:
    """The 13,100 LJSpeech-1.1 lengths (id, samples, frames, text) from ../shared."""
    path = LJSPEECH_LENGTHS
    if not path.is_file():
        pytest.skip(
            f"{path} is absent: it ships in ../shared beside the repo (CI has it); set SHARED_DIR to point elsewhere"
        )
    return path


def _readable_wav(path: Path) -> bool:
    import soundfile

    try:
        return soundfile.info(str(path)).frames > 0
    except RuntimeError:
        return False


@pytest.fixture(scope="session")
def ljspeech_mini(tmp_path_factory) -> Path:
    """Real LJSpeech clips (wavs/ + metadata.csv in LJSpeech's own format) from ../shared.

    Normally the 32 shared clips themselves (read-only: tests copy before they write). If some
    clip in ../shared is damaged (unreadable), the tests run on a copy without it and a warning
    names it, so one broken reference file neither fails nor silently shrinks the suite.
    """
    path = LJSPEECH_MINI
    if not (path / "metadata.csv").is_file():
        pytest.skip(
            f"{path} is absent: it ships in ../shared beside the repo (CI has it); set SHARED_DIR to point elsewhere"
        )
    damaged = sorted(p.name for p in (path / "wavs").glob("*.wav") if not _readable_wav(p))
    if not damaged:
        return path
    warnings.warn(
        f"{len(damaged)} damaged clip(s) in {path / 'wavs'} left out of the tests: {', '.join(damaged)}; "
        "restore them from LJSpeech-1.1"
    )
    copy = tmp_path_factory.mktemp("ljspeech_mini")
    (copy / "wavs").mkdir()
    kept = []
    for line in (path / "metadata.csv").read_text(encoding="utf-8").splitlines():
        name = line.split("|", 1)[0] + ".wav"
        if name not in damaged:
            shutil.copyfile(path / "wavs" / name, copy / "wavs" / name)
            kept.append(line)
    (copy / "metadata.csv").write_text("\n".join(kept) + "\n", encoding="utf-8")
    return copy


@pytest.fixture
def ljspeech_mini_complete(ljspeech_mini) -> Path:
    """The mini corpus exactly as shipped (32 clips, metadata line N = LJ001-000N), for tests that
    depend on its line layout; skipped, naming the damage, when ljspeech_mini had to leave clips out."""
    missing = 32 - len(list((ljspeech_mini / "wavs").glob("*.wav")))
    if missing:
        pytest.skip(f"{missing} clip(s) of {SHARED / 'data/ljspeech/mini/wavs'} are damaged; this test needs all 32")
    return ljspeech_mini


@pytest.fixture(autouse=True)
def one_thread():
    """Every test on one torch thread (train.py's default too): on a busy 2-core machine two
    threads spin against each other and tiny models run ~10x slower. Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, deal the tests marked slow round-robin to the starts of the workers'
    first shares of the collection (the scheduler hands worker i the i-th contiguous share), each
    followed by a quick test. Every worker then starts on long tests at once, no long test starts
    near the end of the run, and no two long tests sit back to back, where the second could not be
    stolen by an idle worker (a worker keeps the test after the running one). Without xdist the
    order is the files'. Every worker computes the same order, as xdist requires."""
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    if workers > 1:
        items[:] = dealt_order(items, workers, lambda item: item.get_closest_marker("slow") is not None)


_SHARED_BEFORE = pytest.StashKey[dict]()
_SHARED_CHANGES = pytest.StashKey[list]()
_SHARED_DAMAGED = pytest.StashKey[list]()
_CHECKOUT_BEFORE = pytest.StashKey[dict]()
_CHECKOUT_CHANGES = pytest.StashKey[list]()


def pytest_sessionstart(session):
    """Hash every file of ../shared before the first test, so that pytest_sessionfinish can fail
    the run if a test wrote there (it is every developer's and CI's reference data). Notes, without
    failing, files that already differ from SHA256SUMS: that damage predates the run. Records the
    checkout's state too (shared_guard.checkout_state): a test writes only under its tmp folders.
    Under pytest-xdist the controller guards the whole run (its workers skip this)."""
    if hasattr(session.config, "workerinput"):
        return
    session.config.stash[_CHECKOUT_BEFORE] = checkout_state(REPO)
    if not SHARED.is_dir():
        return
    before = snapshot(SHARED)
    session.config.stash[_SHARED_BEFORE] = before
    if (SHARED / "SHA256SUMS").is_file():
        session.config.stash[_SHARED_DAMAGED] = damaged(read_sums(SHARED / "SHA256SUMS"), before)


def pytest_sessionfinish(session):
    """A run whose tests changed, added or removed a file under ../shared or in the checkout fails
    (exit status 1), even if every test passed; pytest_terminal_summary names the files."""
    guarded = (
        (_SHARED_BEFORE, _SHARED_CHANGES, lambda: snapshot(SHARED) if SHARED.is_dir() else {}),
        (_CHECKOUT_BEFORE, _CHECKOUT_CHANGES, lambda: checkout_state(REPO)),
    )
    for before_key, changes_key, now in guarded:
        before = session.config.stash.get(before_key, None)
        changes = [] if before is None else differences(before, now())
        if changes:
            session.config.stash[changes_key] = changes
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config):
    """Say which files of ../shared were damaged before the run, and which the run changed."""
    broken = config.stash.get(_SHARED_DAMAGED, [])
    if broken:
        terminalreporter.section(f"{SHARED} already differs from its SHA256SUMS (restore these files)", yellow=True)
        for line in broken:
            terminalreporter.write_line(line)
    for key, title in (
        (_SHARED_CHANGES, f"FAILED: the tests modified {SHARED} (read-only reference data)"),
        (
            _CHECKOUT_CHANGES,
            f"FAILED: the tests modified the checkout {REPO} (tests write only under their tmp folders)",
        ),
    ):
        changes = config.stash.get(key, [])
        if changes:
            terminalreporter.section(title, red=True)
            for line in changes:
                terminalreporter.write_line(line)
