"""Fresh virtual environments that borrow some of this environment's packages, without a download:
a .pth file names a folder of links to this environment's copies. What is not lent is absent, not
merely unimported; pip sees the lent packages as installed and never removes them (they lie outside
the new environment)."""
import importlib.metadata
import subprocess
from pathlib import Path

from packaging.requirements import Requirement


def dependency_closure(names: list[str]) -> list[importlib.metadata.Distribution]:
    """These installed distributions and everything they require (no extras), as installed here."""
    seen, todo, found = set(), [n.lower() for n in names], []
    while todo:
        name = todo.pop().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        found.append(importlib.metadata.distribution(name))
        for req in map(Requirement, found[-1].requires or []):
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name.lower())
    return found


def link_distributions(dists: list[importlib.metadata.Distribution], folder: Path) -> None:
    """Symlink each distribution's top-level entries (packages, modules, .libs, dist-info) into
    folder; not the bytecode cache that single-module distributions share."""
    folder.mkdir()
    for dist in dists:
        assert dist.files, f"{dist.metadata['Name']} has no RECORD: its files are unknown"
        for top in {Path(f).parts[0] for f in dist.files if not str(f).startswith("..")} - {"__pycache__"}:
            (folder / top).symlink_to(Path(dist.locate_file(top)))


def lend(python: Path, dists: list[importlib.metadata.Distribution], folder: Path) -> None:
    """Make dists importable in the environment of python, through links in folder."""
    link_distributions(dists, folder)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "lent.pth").write_text(f"{folder}\n")
