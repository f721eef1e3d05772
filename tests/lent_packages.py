"""Fresh virtual environments that borrow some of this environment's packages, without a download:
a .pth file names a folder of links to this environment's copies. What is not lent is absent, not
merely unimported; pip sees the lent packages as installed and never removes them (they lie outside
the new environment)."""

import importlib.metadata
import subprocess
from pathlib import Path

from packaging.requirements import Requirement


def dependency_closure(names: list[str]) -> list[importlib.metadata.Distribution]:
    """These installed distributions and everything they require, as installed here, following the
    extras a requirement names (a CUDA torch needs cuda-toolkit[cublas,cudart,...])."""
    seen, todo, found = set(), [(n.lower(), "") for n in names], {}
    while todo:
        name, extra = todo.pop()
        name = name.replace("_", "-")
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        dist = found.setdefault(name, importlib.metadata.distribution(name))
        for req in map(Requirement, dist.requires or []):
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo += [(req.name.lower(), wanted) for wanted in ("", *req.extras)]
    return list(found.values())


def link_distributions(dists: list[importlib.metadata.Distribution], folder: Path) -> None:
    """Symlink each distribution's top-level entries (packages, modules, .libs, dist-info) into
    folder; not the bytecode cache that single-module distributions share."""
    folder.mkdir()
    for dist in dists:
        assert dist.files, f"{dist.metadata['Name']} has no RECORD: its files are unknown"
        for top in {Path(f).parts[0] for f in dist.files if not str(f).startswith("..")} - {"__pycache__"}:
            if not (folder / top).is_symlink():  # a namespace folder (CUDA torch's nvidia/) is shared by several
                (folder / top).symlink_to(Path(dist.locate_file(top)))


def lend(python: Path, dists: list[importlib.metadata.Distribution], folder: Path) -> None:
    """Make dists importable in the environment of python, through links in folder."""
    link_distributions(dists, folder)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "lent.pth").write_text(f"{folder}\n")
