"""Measures: a number and a unit (data/text/units.py): '5 km' 'five kilometers', '12KG' 'twelve kilograms',
'2-5lb' 'two to five pounds', '100 million kg', '4 1/2 lbs' 'four and a half pounds', '12/kg' 'twelve per
kilogram', '12kg/kg' 'twelve kilograms per kilogram', '3 mbps'. Units only right after a number."""

from __future__ import annotations

import re

import data.text.numbers as n
from data.text.units import UNITS

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"  # '1,250.5': thousands separators allowed
_AMOUNT = rf"(?:\d+\s)?\d+/\d+|{_NUM}"
_SCALE = r"thousand|million|billion|trillion"
_SPACED = {"s"}  # units read only apart from the number: '45 s' seconds, '4s' fours or a code
#: Units also read in capitals ('12KG'); not all: 'MS', 'MA', 'DB' are more often names than units.
_CAPITALS = {unit.upper(): unit for unit in ("kg", "km", "cm", "mm", "mg", "lb", "lbs", "oz", "ft", "mph", "kph")}
_UNIT = "|".join(map(re.escape, sorted({*UNITS, *_CAPITALS}, key=len, reverse=True)))


def unit_of(written: str) -> tuple[str, str]:
    """(singular, plural) of a unit as written; 'KG' and 'LBS' in capitals are 'kg' and 'lbs'."""
    return UNITS[_CAPITALS.get(written, written)]


def _measure(match: re.Match) -> str:
    sign, low, amount, scale, unit, per = match.groups()
    if unit in _SPACED and match.string[match.start(5) - 1].isdigit():
        return match.group(0)
    one, many = unit_of(unit)
    said = ("minus " if sign else "") + (f"{n.say_number(low)} to " if low else "") + _say_amount(amount)
    said += f" {scale}" if scale else ""
    said += f" {one if amount == '1' and not (low or scale) else many}"
    return said + (f" per {unit_of(per)[0]}" if per else "")


def _say_amount(amount: str) -> str:
    """A number, or a fraction after a whole number ('4 1/2' 'four and a half')."""
    if "/" not in amount:
        return n.say_number(amount)
    whole, _, fraction = amount.rpartition(" ")
    numerator, denominator = (int(part) for part in fraction.split("/"))
    return n.say_mixed_fraction(int(whole) if whole else None, numerator, denominator)


def _per(match: re.Match) -> str:
    """'12/kg' 'twelve per kilogram'."""
    return f"{n.say_number(match.group(1))} per {unit_of(match.group(2))[0]}"


PATTERNS: list[tuple[str, object]] = [
    (
        rf"(?<![\w.])(-)?(?:({_NUM})\s?[-–]\s?)?({_AMOUNT})\s?(?:({_SCALE})\s)?({_UNIT})(?:/({_UNIT}))?(?![\w°])",
        _measure,
    ),
    (rf"(?<![\w.])({_NUM})/({_UNIT})(?![\w°])", _per),
]
