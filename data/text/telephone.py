"""Telephone numbers, social-security numbers and IP addresses: digit by digit, a pause (a comma)
between groups, as a person reads them: '+1 (123) 123-5678' 'plus one, one two three, one two three,
five six seven eight'; '555-0199' 'five five five, zero one nine nine'; '10.0.0.1' 'one zero dot zero...'."""
from __future__ import annotations

import re

from data.text.numbers import say_digits

_PHONE = r"(?<![\w.+-])(?:\+(\d{1,3})[\s-]?)?(?:\((\d{3})\)[\s-]?|(\d{3})[\s.-])(\d{3})[.-](\d{4})(?:-(\d{1,4}))?(?![\w-])"


def _phone(match: re.Match) -> str:
    country, *groups = match.groups()
    said = [say_digits(group) for group in groups if group]
    return ", ".join(([f"plus {say_digits(country)}"] if country else []) + said)


PATTERNS: list[tuple[str, object]] = [
    (_PHONE, _phone),
    (r"(?<![\w.-])(\d{3})-(\d{2})-(\d{4})(?![\w-])", lambda m: ", ".join(map(say_digits, m.groups()))),
    (r"(?<![\w.-])(\d{3})-(\d{4})(?![\w-])", lambda m: ", ".join(map(say_digits, m.groups()))),
    (r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])", lambda m: " dot ".join(map(say_digits, m.group(0).split(".")))),
]
