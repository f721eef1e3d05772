"""Write filelists/ljspeech_{train,val}.txt from a local LJSpeech-1.1 folder (see data/corpora/ljspeech.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from batching.errors import UserError
from data.audio import MelConfig
from data.corpora.ljspeech import prepare_ljspeech
from scripts.common import add_split_arguments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ljspeech", required=True, type=Path, help="folder holding metadata.csv and wavs/")
    add_split_arguments(parser)
    args = parser.parse_args(argv)
    try:
        prepared = prepare_ljspeech(args.ljspeech, args.out, args.seed, args.val_fraction, MelConfig())
    except UserError as err:  # a user's mistake: one line (programming errors keep their tracebacks)
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {prepared.train_path} and {prepared.val_path}")
    print(prepared.summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
