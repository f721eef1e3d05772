"""Checks that the tests leave ../shared (read-only reference data) and the checkout itself
(its files, and what `make demo` or a user's runs left in runs/, corpora/, .cache/) exactly as
they found them.

Plain functions, so that tests/conftest.py can snapshot both around the session and
tests/test_shared_guard.py can prove the detection on folders of its own.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

#: The checkout's default output folders (hparams.yaml's output_dir, demo_dir, espeak_dir,
#: mel_cache_dir; prepare_ljspeech.py's --out): no test may read or write them.
CHECKOUT_OUTPUTS = ("runs", "corpora", ".cache", "filelists")


def snapshot(root: Path) -> dict[str, str]:
    """SHA-256 of every file under root, by path relative to root (links followed)."""
    digests = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with path.open("rb") as file:
                digests[path.relative_to(root).as_posix()] = hashlib.file_digest(file, "sha256").hexdigest()
    return digests


def checkout_state(repo: Path) -> dict[str, str]:
    """Size and mtime of every file under the checkout's output folders (git ignores most of
    them) and of every file `git status` lists (modified, added, untracked), so a test that
    writes into the checkout shows up even where the work tree already had uncommitted changes."""
    state = {}
    for folder in CHECKOUT_OUTPUTS:
        for path in sorted((repo / folder).rglob("*")):
            if path.is_file():
                state[path.relative_to(repo).as_posix()] = _stamp(path)
    try:
        status = subprocess.run(
            ["git", "status", "--porcelain", "-z", "--untracked-files=all"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    except (OSError, subprocess.SubprocessError):  # not a git checkout (e.g. an unpacked archive)
        status = ""
    for entry in filter(None, status.split("\0")):
        name = entry[3:] if entry[2:3] == " " else entry  # '?? path' / ' M path'; a rename's source has no code
        path = repo / name
        state[f"git status {entry}"] = _stamp(path) if path.is_file() else ""
    return state


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{stat.st_size} bytes, mtime {stat.st_mtime_ns}"


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per file that changed, appeared or disappeared between two snapshots."""
    lines = [f"changed: {name}" for name in sorted(before.keys() & after.keys()) if before[name] != after[name]]
    lines += [f"appeared: {name}" for name in sorted(after.keys() - before.keys())]
    lines += [f"disappeared: {name}" for name in sorted(before.keys() - after.keys())]
    return lines


def read_sums(path: Path) -> dict[str, str]:
    """A sha256sum listing ('<hex>  <path>' or '<hex> *<path>' a line) as {path: hex}."""
    sums = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.strip().partition(" ")
        if digest and name:
            sums[name.strip().removeprefix("*")] = digest.lower()
    return sums


def damaged(sums: dict[str, str], current: dict[str, str]) -> list[str]:
    """The listed files whose content differs from the listing, or that are missing."""
    return differences(sums, {name: current[name] for name in sums.keys() & current.keys()})
