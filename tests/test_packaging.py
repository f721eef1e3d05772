"""The project as a package (pyproject.toml): the wheel builds offline and ships `batching` with
numpy and numba as its only dependencies; installed into a fresh virtual environment that has no
torch, the library and the `batching` command work; and the README's example of the sampler in
another task (ASR features) runs.
"""
import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.lent_packages import dependency_closure, lend

REPO = Path(__file__).resolve().parents[1]
# Offline and quiet; PYTHONPATH could put the checkout's own batching/ in front of the installed one.
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PIP_NO_INDEX": "1",
       "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
# Lengths of 300 utterances, one per line: a lengths file the CLI reads ("frames" column of a TSV).
LENGTHS_TSV = "id\tframes\n" + "".join(f"u{i}\t{40 + (i * 53) % 900}\n" for i in range(300))
PLAN_WITHOUT_TORCH = """
import importlib.util, json, sys
import batching
plan = batching.plan_epoch([40 + (i * 53) % 900 for i in range(300)], batching.BatchingConfig('ssb', dbs=True))
assert 'torch' not in sys.modules and importlib.util.find_spec('torch') is None
print(json.dumps(dict(file=batching.__file__, samples=sorted(int(i) for b in plan for i in b), n_batches=len(plan))))
"""


def readme_asr_example() -> str:
    """The README's example of the sampler in another task (section "Using `batching` in another
    project"): read from the README itself, so the documentation cannot drift from what is tested."""
    section = (REPO / "README.md").read_text().split("### Using `batching` in another project", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def run(*args, cwd: Path) -> str:
    """Run a command; fail the test with its output if it fails."""
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def checkout_files() -> list[str]:
    """What a fresh clone plus uncommitted work holds (no .venv, runs/ or caches); without git,
    the files the wheel is built from."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ["pyproject.toml", "README.md"] + [str(p.relative_to(REPO)) for p in REPO.glob("batching/**/*.py")]
    return [name for name in listed.split("\0") if name and (REPO / name).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built by pip offline from a copy of the checkout: setuptools writes build/ and
    *.egg-info beside the sources, and tests do not write into the repository."""
    root = tmp_path_factory.mktemp("wheel")
    for name in checkout_files():
        (root / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, root / "src" / name)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation",
        "--check-build-dependencies", "--wheel-dir", root / "dist", root / "src", cwd=root)
    [path] = (root / "dist").glob("*.whl")
    return path


def requires(wheel: Path) -> list[Requirement]:
    """The wheel's Requires-Dist, read from its METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    return [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv with only the wheel installed in it. numpy, numba and what they need (read from
    the wheel's own metadata) come through a .pth file naming a folder of links to this
    environment's copies: no download, and torch is absent, not merely unimported."""
    root = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", "--without-pip", root / "env", cwd=root)
    python = root / "env" / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel, cwd=root)
    dists = dependency_closure([r.name for r in requires(wheel) if r.marker is None])
    assert "torch" not in {d.metadata["Name"].lower() for d in dists}
    lend(python, dists, root / "outer")
    return root / "env"


def test_wheel_ships_batching_with_numpy_and_numba_only(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("dist-info/entry_points.txt"))
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"batching"}
    assert "batching/sampler.py" in names and "batching/cli.py" in names
    assert "[console_scripts]\nbatching = batching.cli:main" in entry_points
    reqs = requires(wheel)
    assert {r.name for r in reqs if r.marker is None} == {"numpy", "numba"}
    torch = [r for r in reqs if r.name == "torch"]
    # An unpinned torch resolves to a multi-GB CUDA build: only as an extra, and pinned exactly.
    assert len(torch) == 1 and str(torch[0].marker) == 'extra == "torch"' and str(torch[0].specifier).startswith("==")


def test_fresh_venv_plans_and_runs_the_cli_without_torch(venv, tmp_path):
    out = json.loads(run(venv / "bin" / "python", "-c", PLAN_WITHOUT_TORCH, cwd=tmp_path))
    assert Path(out["file"]).is_relative_to(venv) and out["samples"] == list(range(300)) and out["n_batches"] > 1
    (tmp_path / "lengths.tsv").write_text(LENGTHS_TSV)
    cli = venv / "bin" / "batching"
    stats = json.loads(run(cli, "stats", "--lengths", "lengths.tsv", "--hparams", "batching=ssb,dbs=true", "--json",
                           cwd=tmp_path))
    assert stats["n_samples"] == 300 and stats["config"]["batching"] == "ssb" and 0 < stats["zpr"] < 100
    table = run(cli, "table1", "--lengths", "lengths.tsv", cwd=tmp_path)
    assert "| SSB-DBS |" in table and "| RAND |" in table
    assert "stats" in run(cli, "--help", cwd=tmp_path)


def test_readme_asr_example(tmp_path):
    """The README's example runs as a user's script would, with the checkout importable (as after
    `pip install -e .`)."""
    script = tmp_path / "asr_example.py"
    script.write_text(readme_asr_example())
    done = subprocess.run([sys.executable, script], cwd=tmp_path, capture_output=True, text=True,
                          env={**ENV, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout + done.stderr
    left, epoch = re.fullmatch(r"(\d+) batches left in epoch (\d+)\n", done.stdout).groups()
    assert int(left) > 0 and epoch == "1"


def test_wheel_requirements_admit_the_tested_pins(wheel):
    """requirements.txt's pins (what the tests run on) satisfy the wheel's ranges, and its torch
    extra is requirements.txt's exact torch: bump them together."""
    lines = [line.split("#")[0].strip() for line in (REPO / "requirements.txt").read_text().splitlines()]
    pins = dict(line.split("==") for line in lines if "==" in line)
    for req in requires(wheel):
        assert req.specifier.contains(pins[req.name], prereleases=True), (req, pins[req.name])
    assert next(r for r in requires(wheel) if r.name == "torch").specifier == f"=={pins['torch']}"
