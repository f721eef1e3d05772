"""Dates as a person reads them: 'July 25, 2012' 'July twenty-fifth, twenty twelve', '25 Jul 2012' 'the
twenty-fifth of July, twenty twelve', '1/2/2020' 'January second, twenty twenty' (month first, as in
the US, unless the first field cannot be a month), '2016/07/03', '15.01.2020', 'Jan-15-2020', '2Q22'.

Month names are read in any case ('JAN. 15', 'july 25'); abbreviations and a lower-case 'may' only
before a day or a year, where they cannot be ordinary words ('On the mar.', 'you may 2 ...' stay).
"""

from __future__ import annotations

import re

import data.text.numbers as n

_ABBREVIATIONS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "sept": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH_NUMBERS = {**{month: i + 1 for i, month in enumerate(n.MONTHS)}, **_ABBREVIATIONS}
MONTH = rf"(?i:{'|'.join(n.MONTHS)}|(?:{'|'.join(_ABBREVIATIONS)})\b\.?)"
_DAY = r"(\d{1,2})(?!\d)(?i:st|nd|rd|th)?(?![\w:.,]\d)"
_YEAR = r"(?:,?[\s-]+(\d{4})\b(?![.,]\d))?"


def _month(written: str) -> str:
    return n.MONTHS[_MONTH_NUMBERS[written.rstrip(".").lower()] - 1].capitalize()


def _plain_word(month: str, year: str | None) -> bool:
    """A lower-case 'may' before a number and no year is the verb ('you may 2 ...')."""
    return month == "may" and not year


def _month_day(match: re.Match) -> str:
    """'July 25 2012', 'JAN. 15', 'Jan-15-2020' -> 'July twenty-fifth, twenty twelve'."""
    month, day, year = match.group(1), int(match.group(2)), match.group(3)
    if not 1 <= day <= 31 or _plain_word(month, year):
        return match.group(0)
    return f"{_month(month)} {n.say_ordinal(day)}" + (f", {n.say_year(int(year))}" if year else "")


def _day_month(match: re.Match) -> str:
    """'25 July 2012', '25th jul', 'the 26th May' -> 'the twenty-fifth of July, twenty twelve'."""
    day, month, year = int(match.group(2)), match.group(3), match.group(4)
    if not 1 <= day <= 31 or _plain_word(month, year):
        return match.group(0)
    said = f"the {n.say_ordinal(day)} of {_month(month)}"  # group 1: a 'the' already written
    return said + (f", {n.say_year(int(year))}" if year else "")


def _numeric_date(match: re.Match) -> str:
    """M/D/YYYY (American), or D/M/YYYY when the first field cannot be a month."""
    first, second, year = int(match.group(1)), int(match.group(3)), match.group(4)
    month, day = (first, second) if first <= 12 else (second, first)
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match.group(0)
    if first > 12:  # read as written, day first
        return f"the {n.say_ordinal(day)} of {n.MONTHS[month - 1]}, {_say_year(year)}"
    return f"{n.MONTHS[month - 1]} {n.say_ordinal(day)}, {_say_year(year)}"


def _year_first(match: re.Match) -> str:
    year, month, day = match.group(1), int(match.group(3)), int(match.group(4))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match.group(0)
    return f"{n.MONTHS[month - 1]} {n.say_ordinal(day)}, {_say_year(year)}"


def _say_year(year: str) -> str:
    """A two-digit year as written: '98' 'ninety-eight', '05' 'oh five'."""
    if len(year) == 2:
        return f"{'oh ' if year[0] == '0' else ''}{n.say_cardinal(int(year))}"
    return n.say_year(int(year))


PATTERNS: list[tuple[str, object]] = [
    (r"\b(\d{1,2})(/)(\d{1,2})/(\d{4}|\d{2})\b(?![/.]\d)", _numeric_date),
    (r"(?<![\d.-])(\d{1,2})([.-])(\d{1,2})\2(\d{4})\b(?![.-]\d)", _numeric_date),
    (r"(?<![\d./-])(\d{4})([/-])(\d{1,2})\2(\d{1,2})\b(?![/-]\d)", _year_first),
    (rf"\b({MONTH})[\s-]+{_DAY}{_YEAR}", _month_day),
    (rf"\b((?i:the)\s+)?{_DAY}\s+(?:of\s+)?({MONTH}){_YEAR}", _day_month),
    (rf"\b({MONTH}),?\s+(\d{{4}})\b(?![.,]\d)", lambda m: f"{_month(m.group(1))} {n.say_year(int(m.group(2)))}"),
    (r"\b([1-4])Q(\d{2})\b", lambda m: f"the {n.say_ordinal(int(m.group(1)))} quarter of {_say_year(m.group(2))}"),
]
