"""Offline install (scripts/release/wheelhouse.py behind `make wheelhouse` and `make install-offline`): a
wheelhouse built for this machine installs with no index into fresh virtual environments that have
this machine's torch, torch stays as it was, and the recipe then runs there (eSpeak speaks,
`train.py --check` passes on a small generated corpus). The GPU machine's case is tested too: it
has torch, numpy, scipy etc. but not librosa, soundfile, unidecode, inflect, espeakng-loader, so
only their wheels travel and install. Building a wheelhouse needs PyPI (pip's cache serves repeats).
"""

import importlib.metadata
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from scripts.release import wheelhouse
from tests.kit import REPO, run_command
from tests.lent_packages import dependency_closure, lend

#: torch's version as pip sees it (its metadata; a CUDA build's torch.__version__ adds +cuXXX)
TORCH = importlib.metadata.version("torch")

ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
}
# What the GPU machine lacks of requirements-docker.txt (it has torch, numpy, scipy, numba, ...).
MISSING_ON_GPU = ("librosa", "soundfile", "unidecode", "inflect", "espeakng-loader")
OWN_PACKAGES = (
    "import importlib.metadata as m, json, sysconfig; print(json.dumps({d.metadata['Name']: d.version "
    "for d in m.distributions(path=[sysconfig.get_path('purelib')])}))"
)
SPEAK_THEN_CHECK = (
    "import sys, train\nfrom data.corpora.espeak_engine import speak\n"
    "assert speak('offline install').size > 1000\nsys.exit(train.main(sys.argv[1:]))"
)


def run(*args, cwd: Path = REPO, expect: int = 0, **env) -> subprocess.CompletedProcess:
    """Run a command; fail the test with its output unless it exits with `expect`."""
    return run_command(*args, cwd=cwd, env={**ENV, **{k: str(v) for k, v in env.items()}}, expect=expect)


def make(target: str, python: Path = Path(sys.executable), expect: int = 0, **variables) -> subprocess.CompletedProcess:
    """`make TARGET PYTHON=python NAME=value ...` in the checkout (it writes nothing there)."""
    return run(
        "make",
        "-s",
        "--no-print-directory",
        target,
        f"PYTHON={python}",
        *(f"{k}={v}" for k, v in variables.items()),
        expect=expect,
    )


def pins() -> dict[str, str]:
    """requirements-docker.txt: name -> pinned version."""
    lines = [line.split("#", 1)[0].strip() for line in (REPO / "requirements-docker.txt").read_text().splitlines()]
    return dict(line.split("==") for line in lines if "==" in line)


def fresh_venv(root: Path, lent: list[str]) -> Path:
    """A new virtual environment (its python) that borrows pip and the closure of `lent` from here."""
    run(sys.executable, "-m", "venv", "--without-pip", root / "env")
    python = root / "env" / "bin" / "python"
    lend(python, dependency_closure(["pip", *lent]), root / "lent")
    return python


def own_packages(python: Path) -> dict[str, str]:
    """What the environment of python holds itself, canonical name -> version (not what it borrows)."""
    found = json.loads(run(python, "-c", OWN_PACKAGES).stdout)
    return {wheelhouse.canonical(name): version for name, version in found.items()}


def assert_recipe_runs(python: Path, tmp_path: Path) -> None:
    """eSpeak NG speaks through espeakng-loader, and `train.py --check` passes on the demo corpus
    (one process: each start of the recipe costs seconds of imports)."""
    hparams = (
        f"demo_utterances=40,demo_dir={tmp_path / 'demo'},mel_cache_dir={tmp_path / 'mels'},"
        f"output_dir={tmp_path / 'run'},progress=false,num_workers=0"
    )
    out = run(
        python, "-c", SPEAK_THEN_CHECK, "--check", "--hparams", hparams, cwd=tmp_path, PYTHONPATH=REPO, TMPDIR=tmp_path
    ).stdout
    assert "data check passed" in out and "batches per epoch" in out, out
    assert not (tmp_path / "run").exists()


def fake_wheel(folder: Path, name: str, version: str, requires: str = "") -> Path:
    """A minimal pure-Python wheel with nothing but metadata (and what it requires)."""
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + (f"Requires-Dist: {requires}\n" if requires else ""),
        )
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{info}/RECORD", f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return path


@pytest.mark.slow
def test_wheelhouse_installs_offline_beside_torch_and_the_recipe_runs(tmp_path):
    wheels = tmp_path / "wheelhouse"
    assert "wheels," in make("wheelhouse", WHEELHOUSE=wheels).stdout
    assert not [w for w in wheels.glob("*.whl") if wheelhouse.wheel_name(w) == "torch"]
    python = fresh_venv(tmp_path, ["torch"])
    out = make("install-offline", python, WHEELHOUSE=wheels).stdout
    assert f"torch {TORCH} unchanged" in out and "differs from the pins" not in out, out
    own = own_packages(python)
    assert {name: own.get(name) for name in pins()} == pins()  # in the venv itself, at the pinned versions
    assert "torch" not in own
    assert_recipe_runs(python, tmp_path)


@pytest.mark.slow
def test_only_the_missing_wheels_travel_to_a_machine_that_has_the_rest(tmp_path):
    """The GPU machine's case: `TARGET_HAS=` its package list, then `ONLY_MISSING=1` there."""
    python = fresh_venv(tmp_path, ["torch", *(name for name in pins() if name not in MISSING_ON_GPU)])
    has = tmp_path / "target-packages.txt"
    has.write_text(run(python, "-m", "pip", "list", "--format=freeze").stdout)
    wheels = tmp_path / "wheelhouse"
    assert "left out" in make("wheelhouse", WHEELHOUSE=wheels, TARGET_HAS=has).stdout
    carried = {wheelhouse.wheel_name(w) for w in wheels.glob("*.whl")}
    assert set(MISSING_ON_GPU) <= carried and not carried & wheelhouse.freeze_names(has)
    out = make("install-offline", python, WHEELHOUSE=wheels, ONLY_MISSING=1).stdout
    assert f"installed {len(carried)} missing of {len(carried)} wheels" in out, out
    assert f"torch {TORCH} unchanged" in out
    assert set(own_packages(python)) == carried
    assert_recipe_runs(python, tmp_path)


def test_install_refuses_to_change_torch(tmp_path):
    python = fresh_venv(tmp_path, ["torch"])
    fake_wheel(tmp_path / "wheels", "torch", "2.0.0")
    (tmp_path / "wants-torch.txt").write_text("torch==2.0.0\n")
    done = make(
        "install-offline", python, expect=2, WHEELHOUSE=tmp_path / "wheels", REQUIREMENTS=tmp_path / "wants-torch.txt"
    )
    assert "(constraint) torch==" + TORCH in done.stdout + done.stderr
    assert f"error: pip could not install from {tmp_path / 'wheels'} (above); torch {TORCH} unchanged" in done.stderr
    assert "torch" not in own_packages(python)


def test_a_missing_wheel_that_does_not_fit_fails_loudly(tmp_path):
    python = fresh_venv(tmp_path, ["torch"])
    fake_wheel(tmp_path / "wheels", "needs_numpy", "1.0", requires="numpy>=99")
    done = run(
        python,
        "-m",
        "scripts.release.wheelhouse",
        "install",
        "--wheelhouse",
        tmp_path / "wheels",
        "--only-missing",
        expect=1,
    )
    assert "needs-numpy 1.0 requires numpy" in done.stderr.lower(), done.stderr


def test_install_needs_torch_and_wheels(tmp_path):
    run(sys.executable, "-m", "venv", "--without-pip", tmp_path / "env")
    fake_wheel(tmp_path / "wheels", "tiny", "1.0")
    script = ("-m", "scripts.release.wheelhouse")
    done = run(tmp_path / "env" / "bin" / "python", *script, "install", "--wheelhouse", tmp_path / "wheels", expect=2)
    assert done.stderr.startswith("error: ") and "has no torch" in done.stderr
    done = run(sys.executable, *script, "install", "--wheelhouse", tmp_path / "empty", expect=2)
    assert (
        done.stderr == f"error: {tmp_path / 'empty'} holds no wheels: build it with `make wheelhouse` (docs/gpu.md)\n"
    )


def test_platform_tags_take_every_older_manylinux():
    tags = wheelhouse.platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and tags[-1] == "manylinux1_x86_64" and len(tags) == 24 + 3
    assert tags.index("manylinux2014_x86_64") == tags.index("manylinux_2_17_x86_64") + 1
    assert wheelhouse.platform_tags("macosx_11_0_arm64") == ["macosx_11_0_arm64"]
    assert wheelhouse.target_options("3.12", "manylinux_2_17_aarch64")[:4] == [
        "--python-version",
        "3.12",
        "--platform",
        "manylinux_2_17_aarch64",
    ]
    assert wheelhouse.target_options(None, None) == []  # this Python, this machine: pip's own choice


@pytest.mark.skipif(sys.platform != "linux", reason="the default platform for another Python is Linux's")
def test_another_python_defaults_to_what_pypis_torch_needs():
    assert wheelhouse.target_options("3.12", None)[2:4] == ["--platform", f"manylinux_2_28_{os.uname().machine}"]


def test_download_refuses_bad_input_before_downloading(tmp_path, capsys):
    (tmp_path / "freeze.txt").write_text("numpy==2.4.6\n# a comment\n\n==oops\n")
    (tmp_path / "full").mkdir()
    fake_wheel(tmp_path / "full", "tiny", "1.0")
    for args, message in (
        (["--python-version", "312"], "--python-version '312' is not a Python version such as 3.12"),
        (["--target-has", str(tmp_path / "freeze.txt")], f"{tmp_path / 'freeze.txt'}:4: '==oops' is not"),
        (["--target-has", str(tmp_path / "none.txt")], f"--target-has {tmp_path / 'none.txt'}: no such file"),
        (["--dest", str(tmp_path / "full")], f"{tmp_path / 'full'} already holds wheels"),
    ):
        assert wheelhouse.main(["download", "--dest", str(tmp_path / "new"), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {message}"), err
    assert not (tmp_path / "new").exists()


def test_a_failed_download_leaves_no_wheelhouse(tmp_path, capsys):
    (tmp_path / "broken.txt").write_text("numpy=== ==\n")  # pip refuses it before any download
    assert (
        wheelhouse.main(["download", "--requirements", str(tmp_path / "broken.txt"), "--dest", str(tmp_path / "wh")])
        == 1
    )
    assert "error: " in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.txt"]


def test_the_gpu_image_list_leaves_out_just_what_the_gpu_machine_lacks():
    """scripts/release/gpu_image_packages.txt (what `make gpu-carry` leaves out) reads as a --target-has
    listing; of requirements-docker.txt's pins it has all but the ones the machine lacks."""
    image = wheelhouse.freeze_names(REPO / "scripts" / "release" / "gpu_image_packages.txt")
    pinned = {wheelhouse.canonical(name) for name in pins()}
    assert {"torch", "numpy", "numba", "scipy", "pytest", "hypothesis"} <= image
    assert pinned - image == set(MISSING_ON_GPU)


def test_shared_dir_names_the_copy_a_gpu_machine_reads(tmp_path):
    """data/shared.py: ../shared beside the checkout by default, SHARED_DIR's folder when it is set
    (a copy carried to a machine that gets only the checkout); gpu_check, the benchmarks and the
    eSpeak corpus take the path from there (the probe imports only what is torch-free)."""
    probe = "from scripts.release.gpu_check import bench; print(bench.LJSPEECH_LENGTHS)"
    default = run(sys.executable, "-c", probe).stdout.strip()
    beside = Path(os.environ.get("SHARED_DIR") or REPO.parent / "shared")  # CI may set it already
    assert default == str(beside / "data" / "ljspeech" / "lengths.tsv")
    moved = run(sys.executable, "-c", probe, SHARED_DIR=tmp_path).stdout.strip()
    assert moved == str(tmp_path / "data" / "ljspeech" / "lengths.tsv")
