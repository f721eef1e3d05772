import io
import runpy
import sys
from collections import Counter
from pathlib import Path

import pytest

from data.text import (
    N_SYMBOLS,
    SYMBOLS,
    UnknownSymbolError,
    arpabet_problem,
    clean_text,
    find_unknown_symbols,
    sequence_to_text,
    text_to_sequence,
)
from data.textcheck import MAX_EXAMPLES, check_texts
from tests.kit import run_command, tiny

CASES = Path(__file__).parent / "data" / "normalisation_cases.tsv"


def normalisation_cases() -> list[tuple[str, str, str]]:
    """(written, as a person reads it, category) of tests/data/normalisation_cases.tsv."""
    lines = CASES.read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t")) for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize(
    "raw, cleaned",
    [
        ("It cost $3.50.", "it cost three dollars, fifty cents."),
        ("It cost $1, then $0.01.", "it cost one dollar, then one cent."),
        ("A fine of £5 and £2.5.", "a fine of five pounds and two pounds, fifty pence."),
        ("1,000,000 people", "one million people"),
        ("2.05 metres", "two point zero five metres"),
        ("the 16th, 1st, 22nd and 103rd", "the sixteenth, first, twenty-second and one hundred third"),
        (
            "In 1862, 1905 and 1800; 42 and 2019",
            "in eighteen sixty-two, nineteen oh five and eighteen hundred; forty-two and two thousand nineteen",
        ),
        ("Mr. and Mrs. Smith met Dr. Jones, Jr.", "mister and missus smith met doctor jones, junior"),
        (
            "Drs. Gen. Maj. Lt. Col. Capt. Sgt. Rev. Hon. Esq.",
            "doctors general major lieutenant colonel captain sergeant reverend honorable esquire",
        ),
        ("St. Paul's Co. Ltd. at Ft. Worth", "saint paul's company limited at fort worth"),
        ("Müller’s  café —  bric-à-brac", "muller's cafe -- bric-a-brac"),
        ("  Several\tspaces \n here ", "several spaces here"),
    ],
)
def test_clean_text(raw, cleaned):
    assert clean_text(raw) == cleaned


def test_symbol_table_layout():
    assert SYMBOLS[0] == "_" and N_SYMBOLS == len(SYMBOLS) == len(set(SYMBOLS))
    assert set("abcdefghijklmnopqrstuvwxyz .,?!'-") <= set(SYMBOLS)


def test_sequence_round_trip_and_no_pad_ids():
    ids = text_to_sequence("Hello, Dr. Who!")
    assert 0 not in ids
    assert sequence_to_text(ids) == "hello, doctor who!"


def test_unknown_symbols_raise_with_characters_and_text():
    with pytest.raises(UnknownSymbolError, match=r"\['\^', '_'\].*'a_b \^ c'.*unknown_chars=drop"):
        text_to_sequence("a_b ^ c")


def test_find_unknown_symbols_counts_all_texts():
    assert find_unknown_symbols(["a | b", "c { d | e", "fine & good"]) == Counter({"|": 2, "{": 1})


def test_all_ljspeech_texts_are_encodable(ljspeech_lengths_tsv):
    lines = ljspeech_lengths_tsv.read_text(encoding="utf-8").splitlines()[1:]
    assert len(lines) == 13100
    assert find_unknown_symbols(line.split("\t")[3] for line in lines) == Counter()


@pytest.mark.parametrize("written, said, category", normalisation_cases(), ids=lambda v: "")
def test_transcripts_are_read_as_a_person_reads_them(written, said, category):
    """Every case reads as written down by hand; a 'limit' case (docs/text.md) still reads otherwise,
    so that a fix moves it out of the limits and the docs' coverage stays true."""
    if category == "limit":
        assert clean_text(written) != said
    else:
        assert clean_text(written) == said


def test_the_case_set_is_varied():
    cases = normalisation_cases()
    assert len(cases) >= 300 and len({written for written, _, _ in cases}) == len(cases)
    assert len({category for _, _, category in cases}) >= 15


@pytest.mark.parametrize("raw", ["Fish ^ chips", "a_b", "x { y|z"])
def test_drop_removes_only_the_unknown_characters(raw):
    with pytest.raises(UnknownSymbolError):
        text_to_sequence(raw)
    kept = "".join(ch for ch in raw if ch.isalpha() or ch == " ")
    assert text_to_sequence(raw, "drop") == text_to_sequence(" ".join(kept.split()))


def test_python_m_data_text_prints_one_line_per_line_in_order(monkeypatch, capsys):
    """`python -m data.text`, run in this process as runpy runs it for -m."""
    lines = ["Dr. Smith paid $5.50.", "", "Henry VIII", "a ^ b", "   spaced   out  "]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    monkeypatch.setattr(sys, "argv", ["python -m data.text"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("data.text", run_name="__main__")
    assert done.value.code == 0
    assert capsys.readouterr().out.splitlines() == [
        "doctor smith paid five dollars, fifty cents.",
        "",
        "henry the eighth",
        "a ^ b",
        "spaced out",
    ]


def test_the_check_notes_rewritten_lines_and_what_drop_drops():
    lines = [
        ("t.txt", i + 1, text)
        for i, text in enumerate(
            ["Plain words.", "It cost $5.", "Dr. Who ^ 2", "a ^ b { c", "WELL,   fine"]
            + [f"{k} cats" for k in range(8)]
        )
    ]
    problems, notes = check_texts(lines, "drop")
    assert problems == []
    assert len(notes.rewrites) == 2 + 8  # lines 2, 3 and the numbers; 5 only changes case and spaces
    assert notes.rewrites[0] == "t.txt:2: 'It cost $5.' -> 'it cost five dollars.'"
    assert notes.dropped == {"^": ["t.txt:3", "t.txt:4"], "{": ["t.txt:4"]}
    shown = "\n".join(notes.lines())
    assert f"normalisation rewrote 10 line(s) (numbers, symbols, abbreviations...); the first {MAX_EXAMPLES}" in shown
    assert "'^' in 2 line(s): t.txt:3, t.txt:4" in shown


def test_the_check_refuses_unknown_characters_by_default_and_empty_lines_after_dropping():
    problems, notes = check_texts([("t.txt", 1, "a ^ b"), ("t.txt", 2, "^^")], "error")
    assert [p[:2] for p in problems] == [("t.txt", 1), ("t.txt", 2)] and "unknown_chars=drop" in problems[0][3]
    problems, notes = check_texts([("t.txt", 1, "a ^ b"), ("t.txt", 2, "^^")], "drop")
    assert [p[:3] for p in problems] == [("t.txt", 2, "text '^^' is empty after cleaning")]
    assert notes.dropped == {"^": ["t.txt:1"]}


def test_a_demo_check_never_imports_inflect(tmp_path, demo_corpus):
    """data/text/numbers.py imports inflect (slower to import than torch) on the first number read:
    train.py on the demo corpus, whose texts hold no digits, starts without it."""
    probe = (
        "import sys, train; code = train.main(['--check', '--hparams', sys.argv[1]]); "
        "assert code == 0 and 'inflect' not in sys.modules, (code, 'inflect' in sys.modules)"
    )
    run_command(sys.executable, "-c", probe, tiny(tmp_path, corpus=demo_corpus))


@pytest.mark.parametrize(
    "raw, spoken",
    [
        ("Call +1 800 555 0199.", "call plus one, eight hundred, five five five, zero one nine nine."),
        ("+44 20 7946 0958", "plus four four, two zero, seven nine four six, zero nine five eight"),
        ("(212) 555-0199 ext. 204", "two one two, five five five, zero one nine nine extension two zero four"),
        ("Ext 12 or extension 4021", "extension one two or extension four zero two one"),
    ],
)
def test_telephone_numbers_with_spaces_and_extensions_are_read_digit_by_digit(raw, spoken):
    assert clean_text(raw) == spoken


def test_a_character_without_a_transliteration_is_never_dropped_unseen():
    """An emoji is an unknown character: an error by default, dropped and counted with drop."""
    raw = "That was great 😀 honestly."
    problems, _ = check_texts([("t.txt", 1, raw)], "error")
    assert problems[0][:2] == ("t.txt", 1) and "'😀'" in problems[0][2]
    with pytest.raises(UnknownSymbolError, match="😀"):
        text_to_sequence(raw)
    _, notes = check_texts([("t.txt", 1, raw)], "drop")
    assert notes.dropped == {"😀": ["t.txt:1"]} and notes.rewrites == []  # case only: reported as dropped
    assert sequence_to_text(text_to_sequence(raw, "drop")) == "that was great honestly."


def test_arpabet_in_braces_is_refused_whatever_unknown_chars_says():
    raw = "turn left on {HH AW1 S T AH0 N} street."
    for mode in ("error", "drop"):
        problems, _ = check_texts([("t.txt", 4, raw)], mode)
        assert problems == [("t.txt", 4, *arpabet_problem(["{HH AW1 S T AH0 N}"]))]
        with pytest.raises(UnknownSymbolError, match=r"ARPAbet in braces \{HH AW1 S T AH0 N\}"):
            text_to_sequence(raw, mode)
