"""Offline install: download every wheel the recipe needs except torch, then install them on a
machine without a package index, leaving its torch as it is.

    python -m scripts.release.wheelhouse download [--dest wheelhouse] [--python-version 3.12]
                                          [--platform manylinux_2_28_x86_64] [--target-has FREEZE]
    python -m scripts.release.wheelhouse install --wheelhouse DIR [--only-missing]
    (both take --requirements FILE; default requirements-docker.txt)

`download` resolves requirements-docker.txt (requirements.txt minus torch) with all its dependencies,
binary wheels only, for this Python and platform or for the ones given: a GPU machine keeps the CUDA
build of torch it came with, and a cluster node without internet gets the rest from the folder.
--platform names the newest manylinux tag the target accepts (its glibc); older ones are implied.
For another Python on Linux it defaults to manylinux_2_28 (what PyPI's torch 2.11 wheel itself needs).
--target-has takes `pip list --format=freeze` of the target and leaves out the wheels of what it
already has, so that only the missing ones travel.

`install` runs in the target Python (`make install-offline PYTHON=...`): `pip install --no-index
--no-compile` from the folder only (pip's configuration and PIP_* variables are ignored), with the
installed torch pinned by a constraint, and it fails if torch changed all the same. --only-missing installs, without
dependencies, just the wheels of distributions the target lacks and keeps its own numpy, scipy etc.
(then `pip check` must find nothing wrong with what it installed).
Only the standard library: the target may have nothing else.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform as host
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO / "requirements-docker.txt"
MANYLINUX = re.compile(r"manylinux_2_(\d+)_(\w+)")
# The platform for another Python on Linux when none is given: glibc 2.28, which PyPI's torch 2.11 wheel
# (manylinux_2_28_x86_64) needs too, so a machine that runs it runs these.
OTHER_PYTHON_GLIBC = "2_28"
# manylinux's legacy names for glibc 2.17, 2.12 and 2.5: wheels are still published under them
LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


class UsageError(Exception):
    """Bad input from the user: reported as one `error:` line, exit 2."""


def canonical(name: str) -> str:
    """A distribution name as pip compares it (PEP 503): `Jaraco.Functools` == `jaraco-functools`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(path: Path) -> str:
    """The distribution a wheel file holds, from its file name (`name-version-...-platform.whl`)."""
    return canonical(path.name.split("-", 1)[0])


def platform_tags(platform: str) -> list[str]:
    """Every platform tag a target with this newest tag accepts: manylinux_2_28_x86_64 also takes
    manylinux_2_27 ... manylinux_2_5 and the legacy names; other platforms are passed as given."""
    match = MANYLINUX.fullmatch(platform)
    if not match:
        return [platform]
    newest, arch = int(match.group(1)), match.group(2)
    tags = []
    for minor in range(newest, 4, -1):
        tags.append(f"manylinux_2_{minor}_{arch}")
        if minor in LEGACY_MANYLINUX:
            tags.append(f"{LEGACY_MANYLINUX[minor]}_{arch}")
    return tags


def target_options(python_version: str | None, platform: str | None) -> list[str]:
    """pip download's options for another Python or platform (none: this interpreter's own)."""
    if python_version and not re.fullmatch(r"3\.\d+", python_version):
        raise UsageError(f"--python-version {python_version!r} is not a Python version such as 3.12")
    options = ["--python-version", python_version] if python_version else []
    if python_version and not platform and sys.platform == "linux":
        platform = f"manylinux_{OTHER_PYTHON_GLIBC}_{host.machine()}"
    for tag in platform_tags(platform) if platform else []:
        options += ["--platform", tag]
    return options


def freeze_names(path: Path) -> set[str]:
    """The distribution names in a `pip list --format=freeze` / `pip freeze` listing."""
    if not path.is_file():
        raise UsageError(
            f"--target-has {path}: no such file (write it on the target with "
            "`python -m pip list --format=freeze > FILE`)"
        )
    names = set()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
        if not match:
            raise UsageError(
                f"{path}:{number}: {line!r} is not `name==version`; write the file with "
                "`python -m pip list --format=freeze`"
            )
        names.add(canonical(match.group(0)))
    return names


def download(
    requirements: Path, dest: Path, python_version: str | None, platform: str | None, target_has: Path | None
) -> None:
    """Fill dest with the binary wheels of the requirements and all their dependencies. pip fills a
    folder beside it first: a download that fails half-way leaves no half wheelhouse behind."""
    options = target_options(python_version, platform)
    have = freeze_names(target_has) if target_has else set()
    if dest.is_dir() and any(dest.glob("*.whl")):
        raise UsageError(f"{dest} already holds wheels: remove it, or choose another folder (WHEELHOUSE=...)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}-") as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--only-binary=:all:",
                "--dest",
                tmp,
                "-r",
                str(requirements),
                *options,
            ],
            check=True,
        )
        wheels = sorted(Path(tmp).glob("*.whl"))
        torch = [w.name for w in wheels if wheel_name(w) == "torch"]
        if torch:
            sys.exit(f"error: the wheelhouse must leave torch out, yet {torch[0]} came in as a dependency")
        kept = [w for w in wheels if wheel_name(w) not in have]
        dest.mkdir(exist_ok=True)
        for wheel in kept:
            wheel.rename(dest / wheel.name)
    left_out = sorted({wheel_name(w) for w in wheels} - {wheel_name(w) for w in kept})
    size = sum((dest / w.name).stat().st_size for w in kept) / 2**20
    print(
        f"{dest}: {len(kept)} wheels, {size:.1f} MiB"
        + (f"; left out {len(left_out)} the target has ({target_has}): {', '.join(left_out)}" if left_out else "")
    )


def torch_install() -> tuple[str, str]:
    """(version, location) of the target's torch, read afresh in a new process (pip just ran)."""
    probe = (
        "import importlib.metadata as m, importlib.util as u; "
        "print(m.version('torch')); print(u.find_spec('torch').origin)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if done.returncode != 0:
        raise UsageError(
            f"{sys.executable} has no torch: install the torch build for this machine first "
            "(the wheelhouse leaves torch out on purpose)"
        )
    version, location = done.stdout.split()
    return version, location


def offline_pip(*args: str) -> subprocess.CompletedProcess:
    """pip in this Python with no index and no configuration: nothing but what the command names."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run([sys.executable, "-m", "pip", *args], env=env, capture_output=True, text=True)


def missing_wheels(wheelhouse: Path) -> list[Path]:
    """The wheels whose distribution this Python lacks (at any version)."""
    installed = {canonical(d.metadata["Name"]) for d in importlib.metadata.distributions()}
    return sorted(w for w in wheelhouse.glob("*.whl") if wheel_name(w) not in installed)


def pins_not_kept(requirements: Path) -> list[str]:
    """The requirements' pins this Python has at another version (it keeps its own), or lacks."""
    lines = [line.split("#", 1)[0].strip() for line in requirements.read_text().splitlines()]
    differ = []
    for name, pin in (line.split("==") for line in lines if "==" in line):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        if version != pin:
            differ.append(f"{name} {version} (pinned {pin})")
    return differ


def problems_with(installed: list[Path]) -> list[str]:
    """`pip check`'s complaints about the distributions just installed."""
    names = {wheel_name(w) for w in installed}
    report = offline_pip("check").stdout.splitlines()
    return [line for line in report if line.split() and canonical(line.split()[0]) in names]


def pip_install_args(requirements: Path, wheelhouse: Path, chosen: list[Path], only_missing: bool) -> list[str]:
    """What to install: the chosen wheels alone, or the requirements resolved in the folder."""
    if only_missing:
        return ["--no-deps", *map(str, chosen)]
    return ["--find-links", str(wheelhouse), "-r", str(requirements)]


def pip_install(
    requirements: Path, wheelhouse: Path, chosen: list[Path], only_missing: bool, torch_version: str
) -> str:
    """pip install, offline, with torch pinned at the version it has; pip's output if it failed."""
    with tempfile.TemporaryDirectory() as tmp:
        constraint = Path(tmp) / "torch-pin.txt"
        constraint.write_text(f"torch=={torch_version}\n")
        done = offline_pip(
            "install",
            "--no-index",
            "--no-compile",  # Python writes bytecode on first import: only for what runs, and a quarter of the time
            "-c",
            str(constraint),
            *pip_install_args(requirements, wheelhouse, chosen, only_missing),
        )
    return done.stdout + done.stderr if done.returncode != 0 else ""


def install(requirements: Path, wheelhouse: Path, only_missing: bool) -> None:
    """Install the wheelhouse into this Python with torch held where it is."""
    wheels = sorted(wheelhouse.glob("*.whl"))
    if not wheels:
        raise UsageError(f"{wheelhouse} holds no wheels: build it with `make wheelhouse` (docs/gpu.md)")
    torch_before = torch_install()
    chosen = missing_wheels(wheelhouse) if only_missing else wheels
    failed = pip_install(requirements, wheelhouse, chosen, only_missing, torch_before[0]) if chosen else ""
    torch_after = torch_install()
    if torch_after != torch_before:
        sys.exit(f"{failed}error: torch changed from {torch_before} to {torch_after}: reinstall the machine's own")
    if failed:
        sys.exit(f"{failed}error: pip could not install from {wheelhouse} (above); torch {torch_after[0]} unchanged")
    problems = problems_with(chosen) if only_missing else []
    if problems:
        sys.exit("error: what --only-missing installed does not fit this Python's packages:\n" + "\n".join(problems))
    what = f"{len(chosen)} missing of {len(wheels)} wheels" if only_missing else requirements.name
    print(f"installed {what} from {wheelhouse} into {sys.prefix}; torch {torch_after[0]} unchanged")
    differ = pins_not_kept(requirements)
    if differ:
        print("differs from the pins: " + ", ".join(differ))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    get = commands.add_parser("download", help="download the wheels into a folder")
    get.add_argument("--requirements", type=Path, default=REQUIREMENTS, help="default: %(default)s")
    get.add_argument("--dest", type=Path, default=REPO / "wheelhouse")
    get.add_argument("--python-version", help="the target's Python, e.g. 3.12 (default: this one)")
    get.add_argument(
        "--platform",
        help="the target's newest platform tag, e.g. manylinux_2_28_x86_64 "
        "(default: this machine's; for another --python-version on Linux, "
        f"manylinux_{OTHER_PYTHON_GLIBC}_ARCH)",
    )
    get.add_argument("--target-has", type=Path, help="`pip list --format=freeze` of the target: leave its packages out")
    put = commands.add_parser("install", help="install a downloaded folder into this Python, offline")
    put.add_argument("--requirements", type=Path, default=REQUIREMENTS, help="default: %(default)s")
    put.add_argument("--wheelhouse", type=Path, required=True)
    put.add_argument("--only-missing", action="store_true", help="only distributions this Python lacks, --no-deps")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if not args.requirements.is_file():
            raise UsageError(f"--requirements {args.requirements}: no such file")
        if args.command == "download":
            download(args.requirements, args.dest, args.python_version, args.platform, args.target_has)
        else:
            install(args.requirements, args.wheelhouse, args.only_missing)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        print(f"error: {' '.join(err.cmd[:4])} failed (exit {err.returncode}; its output is above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
