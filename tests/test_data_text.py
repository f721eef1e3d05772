from collections import Counter

import pytest

from data.text import (N_SYMBOLS, SYMBOLS, UnknownSymbolError, clean_text, find_unknown_symbols,
                       sequence_to_text, text_to_sequence)


@pytest.mark.parametrize("raw, cleaned", [
    ("It cost $3.50.", "it cost three dollars, fifty cents."),
    ("It cost $1, then $0.01.", "it cost one dollar, then one cent."),
    ("A fine of £5 and £2.5.", "a fine of five pounds and two pounds, fifty pence."),
    ("1,000,000 people", "one million people"),
    ("2.05 metres", "two point zero five metres"),
    ("the 16th, 1st, 22nd and 103rd", "the sixteenth, first, twenty-second and one hundred third"),
    ("In 1862, 1905 and 1800; 42 and 2019", "in eighteen sixty-two, nineteen oh five and eighteen hundred; forty-two and two thousand nineteen"),
    ("Mr. and Mrs. Smith met Dr. Jones, Jr.", "mister and missus smith met doctor jones, junior"),
    ("Drs. Gen. Maj. Lt. Col. Capt. Sgt. Rev. Hon. Esq.",
     "doctors general major lieutenant colonel captain sergeant reverend honorable esquire"),
    ("St. Paul's Co. Ltd. at Ft. Worth", "saint paul's company limited at fort worth"),
    ("Müller’s  café —  bric-à-brac", "muller's cafe -- bric-a-brac"),
    ("  Several\tspaces \n here ", "several spaces here"),
])
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
    assert find_unknown_symbols(["a * b", "c < d * e", "fine & good"]) == Counter({"*": 2, "<": 1})


def test_all_ljspeech_texts_are_encodable(ljspeech_lengths_tsv):
    lines = ljspeech_lengths_tsv.read_text(encoding="utf-8").splitlines()[1:]
    assert len(lines) == 13100
    assert find_unknown_symbols(line.split("\t")[3] for line in lines) == Counter()
