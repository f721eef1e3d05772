"""What the corpora the project generates (demo.py, espeak.py) share: telling a finished
corpus made with the same settings, which is reused, from one to (re)generate."""
from __future__ import annotations

import json
from pathlib import Path


def is_complete(out_dir: Path, manifest: dict, train: Path, val: Path) -> bool:
    """manifest.json (written last, after every WAV and both filelists) records these settings,
    and the filelists and every WAV it lists exist."""
    try:
        stored = json.loads((out_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    if {k: stored.get(k) for k in manifest} != manifest or not (train.is_file() and val.is_file()):
        return False
    return all((out_dir / "wavs" / name).is_file() for name in stored.get("wavs", []))
