"""The project as a package (pyproject.toml): the wheel builds offline and ships `batching` with
numpy and numba as its only dependencies and torch as a range in its extras; installed into a fresh
virtual environment that has no torch, the library and the `batching` command work; installed
beside this machine's CPU torch, it keeps that torch; `python -m build` makes an sdist and a wheel
that `twine check` accepts; and docs/batching.md's example of the sampler in another task (ASR features) runs.
"""

import email.message
import email.parser
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.kit import REPO, run_command
from tests.lent_packages import dependency_closure, lend

# Offline and quiet; PYTHONPATH could put the checkout's own batching/ in front of the installed one.
ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    "PIP_NO_INDEX": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
}
# The oldest torch the sampler supports (pyproject's extras ask for torch>=this).
OLDEST_TORCH = "2.11"
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
    """docs/batching.md's example of the sampler in another task (section "Using `batching` in another
    project"): read from the page itself, so the documentation cannot drift from what is tested."""
    section = (REPO / "docs" / "batching.md").read_text().split("## Using `batching` in another project", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def run(*args, cwd: Path) -> str:
    """Run a command offline (ENV); fail the test with its output if it fails; its stdout."""
    return run_command(*args, cwd=cwd, env=ENV).stdout


def checkout_files() -> list[str]:
    """What a fresh clone plus uncommitted work holds (no .venv, runs/ or caches); without git,
    the files the wheel is built from."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return ["pyproject.toml", "README.md"] + [str(p.relative_to(REPO)) for p in REPO.glob("batching/**/*.py")]
    return [name for name in listed.split("\0") if name and (REPO / name).is_file()]


def copy_checkout(folder: Path) -> Path:
    """A copy of the checkout's files to build from: setuptools writes build/ and *.egg-info beside
    the sources, and tests do not write into the repository."""
    for name in checkout_files():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built by pip offline from a copy of the checkout."""
    root = tmp_path_factory.mktemp("wheel")
    copy_checkout(root / "src")
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-index",
        "--no-build-isolation",
        "--check-build-dependencies",
        "--wheel-dir",
        root / "dist",
        root / "src",
        cwd=root,
    )
    [path] = (root / "dist").glob("*.whl")
    return path


def metadata(wheel: Path) -> email.message.Message:
    """The wheel's METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def requires(wheel: Path) -> list[Requirement]:
    """The wheel's Requires-Dist."""
    return [Requirement(line) for line in metadata(wheel).get_all("Requires-Dist") or []]


def environment_with(dists: list[importlib.metadata.Distribution], root: Path) -> Path:
    """A fresh venv (no pip of its own) that sees `dists` lent from this environment
    (tests/lent_packages.py): no download, and nothing else is there."""
    run(sys.executable, "-m", "venv", "--without-pip", root / "env", cwd=root)
    lend(root / "env" / "bin" / "python", dists, root / "outer")
    return root / "env"


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv with only the wheel installed in it, and numpy, numba and what they need (read
    from the wheel's own metadata): torch is absent, not merely unimported."""
    root = tmp_path_factory.mktemp("venv")
    dists = dependency_closure([r.name for r in requires(wheel) if r.marker is None])
    assert "torch" not in {d.metadata["Name"].lower() for d in dists}
    env = environment_with(dists, root)
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        env / "bin" / "python",
        "install",
        "--no-deps",
        "--no-index",
        wheel,
        cwd=root,
    )
    return env


def test_wheel_ships_batching_with_numpy_and_numba_only(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("dist-info/entry_points.txt"))
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"batching"}
    assert "batching/sampler.py" in names and "batching/cli.py" in names
    assert {"batching/lhotse/__init__.py", "batching/lhotse/base.py"} <= set(names)  # the subpackage ships
    assert "[console_scripts]\nbatching = batching.cli:main" in entry_points
    reqs = requires(wheel)
    assert {r.name for r in reqs if r.marker is None} == {"numpy", "numba"}
    # torch only in the extras, as a range from the oldest supported version: a pin would refuse
    # every other project's torch.
    torch = [r for r in reqs if r.name == "torch"]
    assert sorted(str(r.marker) for r in torch) == ['extra == "lhotse"', 'extra == "lightning"', 'extra == "torch"']
    assert all(str(r.specifier) == f">={OLDEST_TORCH}" for r in torch)
    meta = metadata(wheel)
    assert meta["License-Expression"] == "BSD-3-Clause" and meta.get_all("License-File") == ["LICENSE"]
    assert (
        meta["Version"] == batching_version() and f"{meta['Name'].replace('-', '_')}-{meta['Version']}-" in wheel.name
    )


def test_fresh_venv_plans_and_runs_the_cli_without_torch(venv, tmp_path):
    out = json.loads(run(venv / "bin" / "python", "-c", PLAN_WITHOUT_TORCH, cwd=tmp_path))
    assert Path(out["file"]).is_relative_to(venv) and out["samples"] == list(range(300)) and out["n_batches"] > 1
    (tmp_path / "lengths.tsv").write_text(LENGTHS_TSV)
    cli = venv / "bin" / "batching"
    stats = json.loads(
        run(cli, "stats", "--lengths", "lengths.tsv", "--hparams", "batching=ssb,dbs=true", "--json", cwd=tmp_path)
    )
    assert stats["n_samples"] == 300 and stats["config"]["batching"] == "ssb" and 0 < stats["zpr"] < 100
    table = run(cli, "table1", "--lengths", "lengths.tsv", cwd=tmp_path)
    assert "| SSB-DBS |" in table and "| RAND |" in table
    assert "stats" in run(cli, "--help", cwd=tmp_path)


def test_readme_asr_example(tmp_path):
    """docs/batching.md's example runs as a user's script would, with the checkout importable (as after
    `pip install -e .`)."""
    script = tmp_path / "asr_example.py"
    script.write_text(readme_asr_example())
    done = run_command(sys.executable, script, cwd=tmp_path, env={**ENV, "PYTHONPATH": str(REPO)})
    left, epoch = re.fullmatch(r"(\d+) batches left in epoch (\d+)\n", done.stdout).groups()
    assert int(left) > 0 and epoch == "1"


def test_wheel_requirements_admit_the_tested_pins(wheel):
    """The pins of requirements.txt and requirements-dev.txt (what the tests run on) satisfy the
    wheel's ranges; requirements.txt keeps torch pinned exactly (this project's CPU install)."""
    pins = {}
    for path in ("requirements.txt", "requirements-dev.txt"):
        lines = [line.split("#")[0].strip() for line in (REPO / path).read_text().splitlines()]
        pins |= dict(line.split("==") for line in lines if "==" in line)
    for req in requires(wheel):
        assert req.specifier.contains(pins[req.name], prereleases=True), (req, pins[req.name])
        assert req.name != "torch" or req.specifier.contains(f"{OLDEST_TORCH}.0")
    assert pins["torch"] == importlib.metadata.version("torch").split("+")[0]


def test_wheel_installs_beside_the_torch_already_there(wheel, tmp_path):
    """An environment that has this machine's CPU torch: pip installs the wheel with its [torch]
    extra, offline, and leaves that torch as it is (the range admits it, nothing else is fetched)."""
    env = environment_with(dependency_closure(["torch", "numpy", "numba"]), tmp_path)
    python = env / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--no-index", f"{wheel}[torch]"]
    report = json.loads(run(*pip, "--dry-run", "--quiet", "--report", "-", cwd=tmp_path))
    assert [item["metadata"]["name"] for item in report["install"]] == ["tacotron2-batching"]
    run(*pip, cwd=tmp_path)
    probe = (
        "import importlib.metadata as m, json, torch, batching.sampler; "
        "print(json.dumps([m.version('torch'), torch.__file__, batching.__file__]))"
    )
    version, torch_file, batching_file = json.loads(run(python, "-c", probe, cwd=tmp_path))
    assert version == importlib.metadata.version("torch") and Path(torch_file).is_relative_to(tmp_path / "outer")
    assert Path(batching_file).is_relative_to(env)


def test_build_makes_an_sdist_and_a_wheel_that_twine_accepts(tmp_path):
    """`python -m build` (offline: --no-isolation, with the setuptools requirements-dev.txt pins)
    and `twine check --strict`; the sdist carries the LICENSE."""
    source = copy_checkout(tmp_path / "src")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", tmp_path / "dist", source, cwd=tmp_path)
    built, sdist = sorted((tmp_path / "dist").iterdir())  # .whl sorts before .tar.gz
    assert sdist.name == f"tacotron2_batching-{batching_version()}.tar.gz" and built.suffix == ".whl"
    checked = run(sys.executable, "-m", "twine", "check", "--strict", sdist, built, cwd=tmp_path)
    assert checked.count("PASSED") == 2
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    assert f"tacotron2_batching-{batching_version()}/LICENSE" in names


def batching_version() -> str:
    """batching.__version__ as written in the source (the one place the version lives)."""
    return re.search(r'^__version__ = "([^"]+)"', (REPO / "batching" / "__init__.py").read_text(), re.M).group(1)
