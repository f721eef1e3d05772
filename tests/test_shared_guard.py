"""The ../shared guard (tests/shared_guard.py and its hooks in conftest): it notices a changed,
new or removed file, checks SHA256SUMS, and fails a pytest session that wrote there. Every check
runs on a folder of its own: nothing here touches the real ../shared.
"""

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.kit import REPO, run_command
from tests.shared_guard import checkout_state, damaged, differences, read_sums, snapshot

INNER_CONFTEST = (
    "from tests.conftest import pytest_sessionfinish, pytest_sessionstart, pytest_terminal_summary  # noqa\n"
)
INNER_TESTS = """
import os
from pathlib import Path

SHARED = Path(os.environ["SHARED_DIR"])


def test_reads():
    assert (SHARED / "data" / "a.txt").read_text() == "a"


def test_writes():
    (SHARED / "data" / "a.txt").write_text("A")
    (SHARED / "new.txt").write_text("new")
"""


def fake_shared(root: Path) -> Path:
    """A small shared folder: two data files and a SHA256SUMS listing b.bin with a wrong digest."""
    (root / "data").mkdir(parents=True)
    (root / "data" / "a.txt").write_text("a")
    (root / "data" / "b.bin").write_bytes(bytes(range(256)))
    digest = hashlib.sha256(b"a").hexdigest()
    (root / "SHA256SUMS").write_text(f"{digest}  data/a.txt\n{'0' * 64} *data/b.bin\n")
    return root


def test_snapshot_and_differences(tmp_path):
    shared = fake_shared(tmp_path / "shared")
    before = snapshot(shared)
    assert sorted(before) == ["SHA256SUMS", "data/a.txt", "data/b.bin"]
    assert before["data/a.txt"] == hashlib.sha256(b"a").hexdigest()
    assert differences(before, snapshot(shared)) == []
    (shared / "data" / "a.txt").write_text("A")
    (shared / "data" / "c.txt").write_text("c")
    (shared / "data" / "b.bin").unlink()
    assert differences(before, snapshot(shared)) == [
        "changed: data/a.txt",
        "appeared: data/c.txt",
        "disappeared: data/b.bin",
    ]


def test_damaged_against_sha256sums(tmp_path):
    shared = fake_shared(tmp_path / "shared")
    sums = read_sums(shared / "SHA256SUMS")
    assert sums == {"data/a.txt": hashlib.sha256(b"a").hexdigest(), "data/b.bin": "0" * 64}
    assert damaged(sums, snapshot(shared)) == ["changed: data/b.bin"]  # unlisted files (SHA256SUMS) are ignored
    (shared / "data" / "a.txt").unlink()
    assert damaged(sums, snapshot(shared)) == ["changed: data/b.bin", "disappeared: data/a.txt"]


def run_inner_session(tmp_path: Path) -> subprocess.CompletedProcess:
    """pytest on two tests (one writes into shared) with this suite's conftest hooks, SHARED_DIR
    pointing at a fake shared."""
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "conftest.py").write_text(INNER_CONFTEST)
    (inner / "test_inner.py").write_text(textwrap.dedent(INNER_TESTS))
    env = {
        **os.environ,
        "SHARED_DIR": str(fake_shared(tmp_path / "shared")),
        "PYTHONPATH": str(REPO),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return run_command(
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", inner, cwd=inner, env=env, expect=None
    )


def test_a_session_that_writes_into_shared_fails_and_older_damage_only_warns(tmp_path):
    """One inner session (each costs a torch import): b.bin was damaged before it (a warning), and
    its tests write a.txt and new.txt (the failure, naming both)."""
    done = run_inner_session(tmp_path)
    assert done.returncode == 1 and "2 passed" in done.stdout, done.stdout + done.stderr
    assert "already differs from its SHA256SUMS" in done.stdout and "changed: data/b.bin" in done.stdout
    assert "the tests modified" in done.stdout
    assert "changed: data/a.txt\nappeared: new.txt\n" in done.stdout


def test_checkout_state_sees_outputs_and_work_tree_changes(tmp_path):
    """The checkout guard on a git repository of its own: a file written under runs/ (ignored by
    git), a tracked file changed, an already-modified file changed again, a new untracked file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text("runs/\n")
    (repo / "a.py").write_text("a = 1\n")
    (repo / "b.py").write_text("b = 1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    run_command(*git, "init", "-q")
    run_command(*git, "add", ".")
    run_command(*git, "commit", "-qm", "start")
    (repo / "b.py").write_text("b = 2\n")  # uncommitted work before the session
    (repo / "runs" / "demo").mkdir(parents=True)
    (repo / "runs" / "demo" / "metrics.jsonl").write_text("{}\n")  # what `make demo` left
    before = checkout_state(repo)
    assert differences(before, checkout_state(repo)) == []
    (repo / "runs" / "demo" / "metrics.jsonl").write_text("{}\n{}\n")
    (repo / "a.py").write_text("a = 2\n")
    (repo / "b.py").write_text("b = 3\n")
    (repo / "new.txt").write_text("new")
    assert differences(before, checkout_state(repo)) == [
        "changed: git status  M b.py",
        "changed: runs/demo/metrics.jsonl",
        "appeared: git status  M a.py",
        "appeared: git status ?? new.txt",
    ]
