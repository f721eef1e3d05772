"""Score the text front end on NeMo's English normalisation test cases: a table per class and the
share of all cases read as NeMo reads them (scripts/text/nemo_cases.py says how readings compare)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from data.text import clean_text
from data.text.numbers import say_cardinal, say_ordinal
from scripts.common import markdown_table, median_seconds
from scripts.text.nemo_cases import CASES_DIR, by_kind, load_cases, score


def read_cold(texts: list[str]) -> list[str]:
    """Every text read with the numbers' cache empty, as a corpus's first lines are."""
    say_cardinal.cache_clear()
    say_ordinal.cache_clear()
    return [clean_text(text) for text in texts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.text.nemo_score", description=__doc__)
    parser.add_argument("--cases", type=Path, default=CASES_DIR, help="folder of test_cases_*.txt (written~said)")
    parser.add_argument("--misses", action="store_true", help="also print every case read otherwise")
    parser.add_argument("--time", action="store_true", help="also time the front end: the median of 5 cold passes")
    args = parser.parse_args(argv)
    cases = load_cases(args.cases)
    if not cases:
        print(
            f"error: no test_cases_*.txt with written~said lines in {args.cases}; give --cases a folder of them",
            file=sys.stderr,
        )
        return 2
    scored = score(cases)
    rows = [
        [kind, f"{same} / {total}", f"{100 * same / total:.0f}%"] for kind, (same, total) in by_kind(scored).items()
    ]
    same = sum(s.same for s in scored)
    rows.append(["**all**", f"{same} / {len(scored)}", f"{100 * same / len(scored):.1f}%"])
    print("\n".join(markdown_table(["NeMo class", "read as NeMo reads it", "share"], rows)))
    stops = [s for s in scored if s.stops]
    print(f"\n{len(stops)} case(s) would stop a run (characters outside the symbol table)")
    for s in stops:
        print(f"  stops: {s.case.written!r} -> {s.ours!r}")
    if args.time:
        seconds = median_seconds(5, read_cold, [case.written for case in cases])
        print(
            f"\n{1000 * seconds / len(cases):.3f} ms a case (median of 5 passes over {len(cases)} cases, one core, "
            f"the numbers' cache emptied before each)"
        )
    if args.misses:
        for s in scored:
            if not s.same:
                print(f"{s.case.kind}\t{s.case.written}\t{s.ours}\t{s.case.said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
