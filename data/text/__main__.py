"""python -m data.text: read transcripts on standard input, one a line, and print what each
becomes, one a line, in order, so that a corpus can be read before training on it."""

from __future__ import annotations

import argparse
import sys

from data.text import clean_text


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m data.text", description=__doc__).parse_args(argv)
    for line in sys.stdin:
        print(clean_text(line.rstrip("\r\n")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
