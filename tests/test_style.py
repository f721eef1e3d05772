"""The written style kept by a machine: the tree is formatted and linted as pyproject.toml's [tool.ruff]
says (line length, import order, one typing style). Fix a failure with `ruff format .` and
`ruff check --fix .` from the checkout's root (docs/development.md, "Style")."""

import subprocess
import sys

import pytest

from tests.kit import REPO


@pytest.mark.parametrize("command", [["check", "--no-cache", "."], ["format", "--no-cache", "--check", "."]])
def test_the_tree_keeps_the_style(command):
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"ruff {' '.join(command)}:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"


def test_the_style_check_sees_a_violation(tmp_path):
    """The check reads the project's configuration: a file with an unsorted import and an old-style
    annotation fails it, the same file fixed passes."""
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import sys\nimport os\nfrom typing import Optional\n\n\ndef f(x: Optional[int]) -> None:\n"
        "    print(os, sys, x)\n"
    )
    lint = [sys.executable, "-m", "ruff", "check", "--no-cache", "bad.py"]
    found = subprocess.run(lint, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert found.returncode == 1 and "I001" in found.stdout and "UP045" in found.stdout, found.stdout
    subprocess.run([*lint, "--fix"], cwd=tmp_path, capture_output=True, timeout=60)
    assert subprocess.run(lint, cwd=tmp_path, capture_output=True, timeout=60).returncode == 0
    assert "int | None" in bad.read_text()
