"""English text front end: what is written -> what is said (data.text.rules), and the symbol table.

Characters that survive cleaning but are not in the table are errors by default, never dropped
silently: a model cannot learn to say what it never sees, and a silent drop hides data problems.
`unknown_chars="drop"` drops them instead; the data check counts them by character and line.
`python -m data.text` prints what each line of standard input becomes (docs/text.md).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from unidecode import unidecode

from batching.errors import UserError
from data.text.rules import apply_rules, expand_abbreviations

PAD = "_"
PUNCTUATION = "!'\"(),-.:;?[] "
LETTERS = "abcdefghijklmnopqrstuvwxyz"
SYMBOLS: tuple[str, ...] = (PAD, *PUNCTUATION, *LETTERS)
N_SYMBOLS = len(SYMBOLS)
UNKNOWN_CHARS = ("error", "drop")  # what text_to_sequence does with characters outside the table

# The pad symbol only ever comes from padding, so an underscore in text is an unknown character.
_SYMBOL_TO_ID = {symbol: i for i, symbol in enumerate(SYMBOLS) if symbol != PAD}
_KEPT = "£€¥₩¢°±"  # non-ASCII characters the rules read (unidecode would make 'EUR', 'Y=', 'deg' of them)
_NOT_ASCII = re.compile(f"[^\x00-\x7f{_KEPT}]+")
_TYPOGRAPHY = [
    (re.compile(pattern), then)
    for pattern, then in (
        (r"(?<=\d)\s?[–—]\s?(?=\d)", " to "),  # 1990–2000
        (r"\s*[—–]\s*", " -- "),  # a dash between words: LJSpeech writes ' -- '
        (r"…", "..."),
        (r"º", "°"),  # the ordinal indicator written for a degree sign ('45ºC')
        (r"[‘’‚‛′`]", "'"),
        (r"[“”„″«»]", '"'),
        (r"(?<=\d)([½¼¾⅓⅔⅛])", r" \1"),  # '2½' -> '2 1/2'
    )
]
_WHITESPACE_RE = re.compile(r"\s+")


#: NVIDIA's filelists mark ARPAbet phonemes with braces ('{HH AH0 L OW1}'); this table has no phonemes.
_ARPABET = re.compile(r"\{[^{}]*\}")


class UnknownSymbolError(UserError):
    """Cleaned text holds characters that the symbol table lacks (or phonemes in braces)."""


def arpabet_in(text: str) -> list[str]:
    """The `{...}` spans of a raw text: NVIDIA's ARPAbet, which this character table cannot say; read as
    letters ('{HH AW1 S T AH0 N}' 'hh aw one s t ah zero n') they would teach the model nonsense."""
    return _ARPABET.findall(text)


def arpabet_problem(spans: list[str]) -> tuple[str, str]:
    """(what is wrong, what to do) for phonemes in braces: the one wording of the refusal."""
    return (
        f"ARPAbet in braces {', '.join(spans)}: this recipe's symbol table holds letters, not phonemes",
        "write the words in letters (NVIDIA's filelists mark phonemes with braces; this recipe reads characters)",
    )


def to_ascii(text: str) -> str:
    """Typography (curly quotes, dashes, ellipses) as ASCII, accented letters transliterated
    ('Müller' 'Muller'); currency and degree signs kept for the rules to read. A character with no
    transliteration (an emoji, a variation selector) is kept as it is, so that the symbol check names
    it (an error, or dropped and counted with unknown_chars=drop): nothing is removed unseen."""
    text = unicodedata.normalize("NFC", text)  # a letter and its combining accent as one character
    for pattern, then in _TYPOGRAPHY:
        text = pattern.sub(then, text)
    return _NOT_ASCII.sub(_transliterate, text)


def _transliterate(match: re.Match) -> str:
    return "".join(unidecode(ch) or ch for ch in match.group(0))


def clean_text(text: str) -> str:
    """Raw English text -> lower-case ASCII words as spoken, single spaces."""
    text = apply_rules(to_ascii(text))
    text = expand_abbreviations(text.lower())
    return _WHITESPACE_RE.sub(" ", text).strip()


def unknown_in(cleaned: str) -> list[str]:
    """The characters of a cleaned text that the table lacks, sorted, each once."""
    return sorted({ch for ch in cleaned if ch not in _SYMBOL_TO_ID})


def drop_unknown(cleaned: str) -> str:
    return _WHITESPACE_RE.sub(" ", "".join(ch for ch in cleaned if ch in _SYMBOL_TO_ID)).strip()


def find_unknown_symbols(texts: Iterable[str]) -> Counter:
    """Count the characters, after cleaning, that the table lacks, so a data check can list them all."""
    unknown: Counter = Counter()
    for text in texts:
        unknown.update(ch for ch in clean_text(text) if ch not in _SYMBOL_TO_ID)
    return unknown


def text_to_sequence(text: str, unknown_chars: str = "error") -> list[int]:
    """Clean the text and map it to symbol ids. Characters outside the table raise
    UnknownSymbolError (unknown_chars="error") or are dropped ("drop")."""
    spans = arpabet_in(text)
    if spans:
        raise UnknownSymbolError("; ".join(arpabet_problem(spans)) + f": {text!r}")
    cleaned = clean_text(text)
    unknown = unknown_in(cleaned)
    if unknown and unknown_chars == "drop":
        cleaned = drop_unknown(cleaned)
    elif unknown:
        raise UnknownSymbolError(
            f"unknown characters {unknown!r} after cleaning {text!r} (cleaned: {cleaned!r}); "
            f"the symbol table holds {''.join(SYMBOLS)!r}; spell them out in words, or set unknown_chars=drop"
        )
    return [_SYMBOL_TO_ID[ch] for ch in cleaned]


def sequence_to_text(ids: Iterable[int]) -> str:
    return "".join(SYMBOLS[int(i)] for i in ids)
