"""Your own corpus -> the recipe's filelists, NAME_train.txt and NAME_val.txt, with a seeded split.

    python -m scripts.tools.prepare_filelist --metadata my_voice/metadata.csv --name my_voice
    python -m scripts.tools.prepare_filelist --wavs my_voice/wavs --name my_voice

--metadata reads `id|text|normalized text` (LJSpeech's), `id|text` or `wav_path|text` (NVIDIA's
filelists) lines: an id names --wavs/ID.wav (default: the metadata's folder's wavs/), a path is
relative to --wavs (default: the metadata's folder). --wavs alone takes every WAV under the folder
with its transcript beside it (clip.txt or clip.lab). Every clip's frames are read from its header
and every problem is listed at once (data/corpora/metadata.py); nothing is written until all are fixed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from batching.errors import UserError
from data.audio import MelConfig
from data.corpora.metadata import folder_sources, metadata_sources, prepare_filelists
from data.text import UNKNOWN_CHARS
from scripts.common import add_split_arguments


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.metadata is None and args.wavs is None:
        print("error: give --metadata FILE (and optionally --wavs DIR) or --wavs DIR", file=sys.stderr)
        return 2
    try:
        sources = metadata_sources(args.metadata, args.wavs) if args.metadata else folder_sources(args.wavs)
        prepared = prepare_filelists(
            sources,
            args.metadata or args.wavs,
            args.out,
            args.name,
            args.seed,
            args.val_fraction,
            MelConfig(),
            args.unknown_chars,
        )
    except UserError as err:  # a user's mistake: the problems, each naming its file and line
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {prepared.train_path} and {prepared.val_path}")
    print(prepared.summary)
    drop = ",unknown_chars=drop" if args.unknown_chars == "drop" else ""
    print(
        "check it: python train.py --check --hparams "
        f"dataset=filelist,train_filelist={prepared.train_path},val_filelist={prepared.val_path}{drop}"
    )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scripts.tools.prepare_filelist", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--metadata", type=Path, help="id|text|normalized, id|text or wav_path|text lines")
    parser.add_argument("--wavs", type=Path, help="the folder of the clips (alone: each with clip.txt beside it)")
    parser.add_argument(
        "--name", required=True, help="the corpus's name: the filelists are NAME_train.txt, NAME_val.txt"
    )
    add_split_arguments(parser)
    parser.add_argument(
        "--unknown-chars",
        default="error",
        choices=UNKNOWN_CHARS,
        help="characters outside the symbol table: error lists each line; drop keeps the lines and counts "
        "what training (unknown_chars=drop) will drop",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
