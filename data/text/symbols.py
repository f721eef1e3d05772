"""Symbols, read after the numbers: '&' 'and', '@' 'at', '*' 'asterisk', '#' 'hash', '=' 'equals', '<' 'less
than', '±' 'plus or minus', '1-2=5' 'one minus two equals five', '5^2' 'five to the power of two', a lone '$'
'dollar', a lone '/' 'slash'. What has no reading in prose ('^' alone, '_', '|', '{', '}', '\\', '~' alone)
stays, for the symbol check to name."""

from __future__ import annotations

from data.text.money import CURRENCY_SIGNS

_CURRENCY_NAMES = dict(zip(CURRENCY_SIGNS + "¢", ("dollar", "pound", "euro", "yen", "won", "cent")))

#: Before the numbers are read: signs whose reading depends on the digits around them.
MATH: list[tuple[str, object]] = [
    (r"(?<=\d)\s?[-–]\s?(?=\d+\s?=)", " minus "),  # '1-2=5': an equation, not a range
    (r"(?<=\d)\s?\+\s?(?=\d)", " plus "),
    (r"(?<=\w)\^(?=\w)", " to the power of "),
]
#: After the numbers are read.
PATTERNS: list[tuple[str, object]] = [
    (r"\s*&\s*", " and "),
    (r"\s*@\s*", " at "),
    (r"\s*\+\s*", " plus "),
    (r"\s*=\s*", " equals "),
    (r"\s*\*\s*", " asterisk "),
    (r"\s*#\s*", " hash "),
    (r"\s*%\s*", " percent "),
    (r"\s*<\s*", " less than "),
    (r"\s*>\s*", " greater than "),
    (r"\s*±\s*", " plus or minus "),
    (rf"\s*([{CURRENCY_SIGNS}¢])\s*", lambda m: f" {_CURRENCY_NAMES[m.group(1)]} "),
    (r"\s*/\s*", " slash "),
    (r"°", " degrees "),
]
