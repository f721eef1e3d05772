"""Where the project's read-only data lies: `../shared` beside the checkout (the LJSpeech lengths
and 32 clips; present here and in CI, absent for outside users), or the folder SHARED_DIR names,
e.g. a copy carried to a GPU machine, where only the checkout travels. Torch-free and cheap, so
scripts import it before anything heavy."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("SHARED_DIR") or REPO.parent / "shared")
LJSPEECH_LENGTHS = SHARED_DIR / "data" / "ljspeech" / "lengths.tsv"
LJSPEECH_MINI = SHARED_DIR / "data" / "ljspeech" / "mini"
