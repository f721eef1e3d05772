"""English text front end: cleaners that turn raw text into what is spoken, and the symbol table.

Characters that survive cleaning but are not in the table are errors, never dropped silently:
a model cannot learn to say what it never sees, and a silent drop hides data problems.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

import inflect
from unidecode import unidecode

from batching.errors import UserError

PAD = "_"
PUNCTUATION = "!'\"(),-.:;?[] "
LETTERS = "abcdefghijklmnopqrstuvwxyz"
SYMBOLS: tuple[str, ...] = (PAD, *PUNCTUATION, *LETTERS)
N_SYMBOLS = len(SYMBOLS)

# The pad symbol only ever comes from padding, so an underscore in text is an unknown character.
_SYMBOL_TO_ID = {symbol: i for i, symbol in enumerate(SYMBOLS) if symbol != PAD}

_ABBREVIATIONS = {
    "mrs": "missus", "mr": "mister", "drs": "doctors", "dr": "doctor", "st": "saint",
    "co": "company", "jr": "junior", "maj": "major", "gen": "general", "rev": "reverend",
    "lt": "lieutenant", "hon": "honorable", "sgt": "sergeant", "capt": "captain",
    "esq": "esquire", "ltd": "limited", "col": "colonel", "ft": "fort",
}
_ABBREVIATION_RE = re.compile(r"\b(" + "|".join(_ABBREVIATIONS) + r")\.", re.IGNORECASE)

_inflect = inflect.engine()
_COMMA_NUMBER_RE = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+")
_MONEY_RE = re.compile(r"([$£])([0-9]+(?:\.[0-9]+)?)")
_DECIMAL_RE = re.compile(r"([0-9]+)\.([0-9]+)")
_ORDINAL_RE = re.compile(r"([0-9]+)(st|nd|rd|th)\b", re.IGNORECASE)
_NUMBER_RE = re.compile(r"[0-9]+")
_WHITESPACE_RE = re.compile(r"\s+")


class UnknownSymbolError(UserError):
    """Cleaned text holds characters that the symbol table lacks."""


def _say(n: int) -> str:
    return _inflect.number_to_words(n, andword="")


def _say_number(n: int) -> str:
    """Spell an integer the way a reader says it; years 1100-1999 as 'eighteen sixty-two'."""
    if not 1100 <= n < 2000:
        return _say(n)
    century, rest = divmod(n, 100)
    if rest == 0:
        return f"{_say(century)} hundred"
    return f"{_say(century)} {'oh ' if rest < 10 else ''}{_say(rest)}"


_CURRENCY_UNITS = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence")}


def _money(match: re.Match) -> str:
    one, many, sub_one, sub_many = _CURRENCY_UNITS[match.group(1)]
    whole, _, frac = match.group(2).partition(".")
    major, minor = int(whole), int(frac.ljust(2, "0")[:2]) if frac else 0
    parts = []
    if major or not minor:
        parts.append(f"{_say(major)} {one if major == 1 else many}")
    if minor:
        parts.append(f"{_say(minor)} {sub_one if minor == 1 else sub_many}")
    return ", ".join(parts)


def _decimal(match: re.Match) -> str:
    digits = " ".join(_say(int(d)) for d in match.group(2))
    return f"{_say(int(match.group(1)))} point {digits}"


def _ordinal(match: re.Match) -> str:
    return _inflect.number_to_words(_inflect.ordinal(int(match.group(1))), andword="")


def expand_numbers(text: str) -> str:
    """Spell out numbers: '1,000', '£5', '$3.50', '2.5', '16th', '1862', '42'."""
    text = _COMMA_NUMBER_RE.sub(lambda m: m.group(0).replace(",", ""), text)
    text = _MONEY_RE.sub(_money, text)
    text = _DECIMAL_RE.sub(_decimal, text)
    text = _ORDINAL_RE.sub(_ordinal, text)
    return _NUMBER_RE.sub(lambda m: _say_number(int(m.group(0))), text)


def expand_abbreviations(text: str) -> str:
    return _ABBREVIATION_RE.sub(lambda m: _ABBREVIATIONS[m.group(1).lower()], text)


def to_ascii(text: str) -> str:
    """Transliterate to ASCII, keeping '£' so that currency can still be read as pounds."""
    return "£".join(unidecode(part) for part in text.split("£"))


def clean_text(text: str) -> str:
    """Raw English text -> lower-case ASCII words as spoken, single spaces."""
    text = expand_numbers(to_ascii(text)).replace("£", " pounds ")
    text = expand_abbreviations(text.lower())
    return _WHITESPACE_RE.sub(" ", text).strip()


def find_unknown_symbols(texts: Iterable[str]) -> Counter:
    """Count the characters, after cleaning, that the table lacks, so a data check can list them all."""
    unknown: Counter = Counter()
    for text in texts:
        unknown.update(ch for ch in clean_text(text) if ch not in _SYMBOL_TO_ID)
    return unknown


def text_to_sequence(text: str) -> list[int]:
    """Clean the text and map it to symbol ids; raise UnknownSymbolError on characters outside the table."""
    cleaned = clean_text(text)
    unknown = sorted({ch for ch in cleaned if ch not in _SYMBOL_TO_ID})
    if unknown:
        raise UnknownSymbolError(
            f"unknown characters {unknown!r} after cleaning {text!r} (cleaned: {cleaned!r}); "
            f"the symbol table holds {''.join(SYMBOLS)!r}")
    return [_SYMBOL_TO_ID[ch] for ch in cleaned]


def sequence_to_text(ids: Iterable[int]) -> str:
    return "".join(SYMBOLS[int(i)] for i in ids)
