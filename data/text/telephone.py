"""Telephone numbers, social-security numbers and IP addresses: digit by digit, a pause (a comma)
between groups, as a person reads them: '+1 (123) 123-5678' 'plus one, one two three, one two three,
five six seven eight'; '1-800-555-1234' 'one, eight hundred, five five five, ...'; '555-0199' 'five five five,
zero one nine nine'; '10.0.0.1' 'one zero dot zero...'. After a '+' country code the groups may be apart by spaces
('+1 800 555 0199', '+44 20 7946 0958'); an extension is read digit by digit too ('ext. 204' 'extension two zero
four'), as every group of a telephone number is."""

from __future__ import annotations

import re

from data.text.numbers import say_cardinal, say_digits

_TOLL_FREE = {"800", "888", "877", "866", "855", "844", "833"}

_PHONE = (
    r"(?<![\w.+-])(?:\+(\d{1,3})[\s-]?|\b(1)-)?(?:\((\d{3})\)[\s-]?|(\d{3})[\s.-])(\d{3})[.-](\d{4})"
    r"(?:-(\d{1,4}))?(?![\w-])"
)


def _phone(match: re.Match) -> str:
    country, long_distance, bracketed, area, *groups = match.groups()
    said = [_say_area(bracketed or area)] + [say_digits(group) for group in groups if group]
    head = [f"plus {say_digits(country)}"] if country else [long_distance] if long_distance else []
    return ", ".join(head + said)


def _international(match: re.Match) -> str:
    """'+1 800 555 0199' 'plus one, eight hundred, five five five, zero one nine nine': a toll-free area code
    is a number after +1 only (the North American plan's), every other group digit by digit."""
    country, groups = match.group(1), re.split(r"[\s.-]", match.group(2).strip())
    area = _say_area(groups[0]) if country == "1" else say_digits(groups[0])
    return ", ".join([f"plus {say_digits(country)}", area, *map(say_digits, groups[1:])])


def _say_area(digits: str) -> str:
    """Digit by digit, but a toll-free area code as a number: '800' 'eight hundred'."""
    return say_cardinal(int(digits)) if digits in _TOLL_FREE else say_digits(digits)


def _local(match: re.Match) -> str:
    """'555-0199' and '867-5309' are local numbers; '100-1000' and '250-1500' (round numbers, or a first
    group starting with 0 or 1, as no exchange does) are ranges, left to the range rule."""
    exchange, line = match.groups()
    if exchange[0] in "01" or exchange.endswith("0") or line.endswith("00"):
        return match.group(0)
    return f"{say_digits(exchange)}, {say_digits(line)}"


PATTERNS: list[tuple[str, object]] = [
    (_PHONE, _phone),
    (r"(?<![\w.+-])\+(\d{1,3})((?:[ .-]\d{1,4}){2,5})(?![\w-]|[.,]\d)", _international),
    (r"\b(?i:ext\.?|extension)\s?(\d{1,6})\b", lambda m: f"extension {say_digits(m.group(1))}"),
    (r"(?<![\w.-])(\d{3})-(\d{2})-(\d{4})(?![\w-])", lambda m: ", ".join(map(say_digits, m.groups()))),
    (r"(?<![\w.-])(\d{3})-(\d{4})(?![\w-])", _local),
    (r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])", lambda m: " dot ".join(map(say_digits, m.group(0).split(".")))),
]
