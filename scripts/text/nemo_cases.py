"""NeMo's English text-normalisation test cases (tests/data/nemo_en/), read by this front end and scored.

A case counts as read as NeMo reads it when the two readings hold the same words once both are
lower-cased, their punctuation is dropped and letters spelled one by one are joined: NeMo writes
letters to be spelled in capitals ('PM EST', 'WWW'), this front end as single letters ('p m e s t'),
and both say the same; and the British 'and' inside a number ('one hundred and seventy', which NeMo's cases
write in some classes and not in others) is dropped. Other conventions ('missus') count as misses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from data.text import clean_text, unknown_in

CASES_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "nemo_en"
_PUNCTUATION = re.compile(r"[^\w\s']|(?<!\w)'|'(?!\w)|_")
_NUMBER_AND = re.compile(r"\b(hundred|thousand|million|billion|trillion) and (?=[a-z])")
_CAPITALS = re.compile(r"\b[A-Z]{2,}\b")  # NeMo's 'PM', 'EST', 'WWW': letters to spell
_SPELLED = re.compile(r"\b\w(?: \w\b)+")  # 'p m', 'w w w': letters (or digits) one by one


@dataclass(frozen=True)
class Case:
    kind: str  # NeMo's class: the file's name, test_cases_KIND.txt
    written: str
    said: str  # NeMo's reading


@dataclass(frozen=True)
class Scored:
    case: Case
    ours: str
    same: bool
    stops: bool  # our reading holds characters outside the symbol table: it would stop a run


def load_cases(folder: Path = CASES_DIR) -> list[Case]:
    """Every `written~said` line of the folder's test_cases_*.txt, in file and line order."""
    cases = []
    for path in sorted(folder.glob("test_cases_*.txt")):
        kind = path.stem.removeprefix("test_cases_")
        for line in path.read_text(encoding="utf-8").splitlines():
            written, _, said = line.partition("~")
            if written.strip():
                cases.append(Case(kind, written, said))
    return cases


def comparable(text: str) -> str:
    """Lower case, no punctuation, single spaces, no 'and' after 'hundred', 'thousand'..., words in
    capitals spelled and letters spelled one by one joined ('PM EST', 'p m e s t': 'pmest')."""
    text = _CAPITALS.sub(lambda m: " ".join(m.group(0)), text)
    words = _NUMBER_AND.sub(r"\1 ", " ".join(_PUNCTUATION.sub(" ", text.lower()).split()))
    return _SPELLED.sub(lambda m: m.group(0).replace(" ", ""), words)


def score(cases: list[Case]) -> list[Scored]:
    out = []
    for case in cases:
        ours = clean_text(case.written)
        out.append(Scored(case, ours, comparable(ours) == comparable(case.said), bool(unknown_in(ours))))
    return out


def by_kind(scored: list[Scored]) -> dict[str, tuple[int, int]]:
    """NeMo's class -> (cases read as NeMo reads them, cases), classes in name order."""
    table: dict[str, tuple[int, int]] = {}
    for s in scored:
        same, total = table.get(s.case.kind, (0, 0))
        table[s.case.kind] = (same + s.same, total + 1)
    return dict(sorted(table.items()))
