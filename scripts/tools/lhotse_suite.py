"""Run Lhotse's own sampler tests with PlanCutSampler in place of Lhotse's samplers.

    python -m scripts.tools.lhotse_suite --lhotse /path/to/lhotse-checkout [--own] [--work DIR] [-- PYTEST_ARGS]

It copies `test/dataset/sampling/` (and the one fixture those tests read) of a Lhotse checkout
(e.g. `git clone -b v1.33.0 https://github.com/lhotse-speech/lhotse`) into a scratch folder,
rebinds SimpleCutSampler, DynamicCutSampler and DynamicBucketingSampler to PlanCutSampler right
after each module's imports (so ZipSampler, RoundRobinSampler, BucketingSampler... wrap ours), and
runs pytest there against the installed lhotse. `--own` skips the rebinding: the same files with
Lhotse's own samplers, for comparison. Nothing is downloaded; the checkout is only read.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from batching.errors import UserError

REPO = Path(__file__).resolve().parents[2]
SUITE = Path("test/dataset/sampling")
#: What the sampler tests need besides their folder: the package markers and the one fixture they read.
EXTRAS = (Path("test/__init__.py"), Path("test/dataset/__init__.py"), Path("test/fixtures/libri/cuts.json"))
REBINDING = (
    "from batching.lhotse import PlanCutSampler\n"
    "SimpleCutSampler = DynamicCutSampler = DynamicBucketingSampler = PlanCutSampler"
)


def rebind(source: str) -> str:
    """The module with Lhotse's three samplers rebound to PlanCutSampler after its last top-level import."""
    imports = [node.end_lineno for node in ast.parse(source).body if isinstance(node, (ast.Import, ast.ImportFrom))]
    lines = source.splitlines()
    lines.insert(max(imports, default=0), REBINDING)
    return "\n".join(lines) + "\n"


def copy_suite(lhotse: Path, work: Path, substitute: bool) -> list[Path]:
    """Copy the sampler tests (rebound unless not `substitute`) and their extras; returns the missing extras."""
    if not (lhotse / SUITE).is_dir():
        raise UserError(f"{lhotse / SUITE} does not exist: --lhotse must be a Lhotse checkout (holding test/)")
    shutil.copytree(lhotse / SUITE, work / SUITE, dirs_exist_ok=True)
    if substitute:
        for module in (work / SUITE).glob("test_*.py"):
            module.write_text(rebind(module.read_text()))
    missing = []
    for extra in EXTRAS:
        if (lhotse / extra).exists():
            (work / extra).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(lhotse / extra, work / extra)
        else:
            missing.append(extra)
    return missing


def run_suite(lhotse: Path, work: Path, substitute: bool, pytest_args: list[str]) -> int:
    """Copy the suite into `work` and run pytest there; pytest's exit status."""
    for extra in copy_suite(lhotse, work, substitute):
        print(f"note: {extra} is not in the checkout; the tests that read it will error", file=sys.stderr)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "pytest", str(SUITE), "-p", "no:cacheprovider", "-q", "-rfE", *pytest_args]
    return subprocess.run(command, cwd=work, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lhotse", type=Path, required=True, help="a Lhotse checkout (e.g. the v1.33.0 tag)")
    parser.add_argument("--work", type=Path, help="scratch folder to copy the tests into (default: a temporary one)")
    parser.add_argument("--own", action="store_true", help="run with Lhotse's own samplers (no rebinding)")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --), e.g. -n 2 or -k drop_last")
    args = parser.parse_args(argv)
    try:
        if args.work:
            args.work.mkdir(parents=True, exist_ok=True)
            return run_suite(args.lhotse.resolve(), args.work, not args.own, args.pytest_args)
        with tempfile.TemporaryDirectory(prefix="lhotse-suite-") as work:
            return run_suite(args.lhotse.resolve(), Path(work), not args.own, args.pytest_args)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
