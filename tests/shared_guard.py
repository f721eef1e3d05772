"""Checks that the tests leave ../shared (read-only reference data) exactly as they found it.

Plain functions, so that tests/conftest.py can snapshot the folder around the session and
tests/test_shared_guard.py can prove the detection on a folder of its own.
"""
from __future__ import annotations

import hashlib
from pathlib import Path


def snapshot(root: Path) -> dict[str, str]:
    """SHA-256 of every file under root, by path relative to root (links followed)."""
    digests = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with path.open("rb") as file:
                digests[path.relative_to(root).as_posix()] = hashlib.file_digest(file, "sha256").hexdigest()
    return digests


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
