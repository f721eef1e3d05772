"""Money: '$5.50' 'five dollars, fifty cents', '$2.5bn' 'two point five billion dollars', '¥30B' 'thirty
billion yen', '₩460 billion', 'US$76.3 trillion' 'seventy-six point three trillion u s dollars', '20 €',
'50¢', '$250-$300' 'two hundred fifty dollars to three hundred dollars', '$20/mo' 'twenty dollars per month',
'5 USD' 'five dollars'."""

from __future__ import annotations

import re

import data.text.numbers as n

CURRENCY_SIGNS = "$£€¥₩"
_CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "€": ("euro", "euros", "cent", "cents"),
    "¥": ("yen", "yen", "", ""),
    "₩": ("won", "won", "", ""),
}
_COUNTRIES = {"US": "u s", "A": "australian", "C": "canadian", "NZ": "new zealand", "HK": "hong kong", "S": "singapore"}
_SCALES = {
    "thousand": "thousand",
    "k": "thousand",
    "million": "million",
    "m": "million",
    "mn": "million",
    "billion": "billion",
    "bn": "billion",
    "b": "billion",
    "trillion": "trillion",
    "tn": "trillion",
}
PER = {
    "mo": "month",
    "month": "month",
    "yr": "year",
    "year": "year",
    "wk": "week",
    "week": "week",
    "d": "day",
    "day": "day",
    "hr": "hour",
    "h": "hour",
    "hour": "hour",
}
_AMOUNT = r"(?>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"  # '1,250', '2.5', '.01'; atomic: no backtracking


def _money(match: re.Match) -> str:
    """'$5.50' -> 'five dollars, fifty cents'; '$2.5bn' -> 'two point five billion dollars'."""
    minus, country, symbol, amount, scale, per = match.groups()
    said = say_money(symbol, amount, scale, country)
    return ("minus " if minus else "") + said + (f" per {PER[per.lower()]}" if per else "")


def _money_after(match: re.Match) -> str:
    """'20 €' and '50¢': the symbol after the amount (a decimal comma allowed)."""
    amount, symbol = match.group(1).replace(",", "."), match.group(2)
    if symbol == "¢":
        return f"{n.say_number(amount)} {'cent' if amount == '1' else 'cents'}"
    return say_money(symbol, amount, None, None)


def say_money(symbol: str, amount: str, scale: str | None, country: str | None) -> str:
    one, many, sub_one, sub_many = _CURRENCIES[symbol]
    if country:
        one, many = f"{_COUNTRIES[country]} {one}", f"{_COUNTRIES[country]} {many}"
    whole, _, frac = amount.replace(",", "").partition(".")
    if len(frac) > 2 and not frac[2:].strip("0"):  # '$20.500': cents written with three places
        frac = frac[:2]
    if scale or not sub_one or len(frac) > 2:  # '5 million dollars', yen, '$20.506': the amount as a number
        return f"{n.say_number(amount)}{' ' + _SCALES[scale.lower()] if scale else ''} {many}"
    major, minor = int(whole or 0), int(frac.ljust(2, "0")) if frac else 0
    parts = []
    if major or not minor:
        parts.append(f"{n.say_cardinal(major)} {one if major == 1 else many}")
    if minor:
        parts.append(f"{n.say_cardinal(minor)} {sub_one if minor == 1 else sub_many}")
    return ", ".join(parts)


_CODES = {"USD": "$", "GBP": "£", "EUR": "€", "JPY": "¥", "KRW": "₩"}


PATTERNS: list[tuple[str, object]] = [
    (rf"\b({_AMOUNT})\s?({'|'.join(_CODES)})\b", lambda m: say_money(_CODES[m.group(2)], m.group(1), None, None)),
    (rf"\b({'|'.join(_CODES)})\s?({_AMOUNT})\b", lambda m: say_money(_CODES[m.group(1)], m.group(2), None, None)),
    (rf"(?<=\d)\s?[-–]\s?(?=[{CURRENCY_SIGNS}]\d)", " to "),  # '$250-$300'
    (
        rf"(-)?(?:\b({'|'.join(_COUNTRIES)}))?([{CURRENCY_SIGNS}])\s?({_AMOUNT})(?:\s?((?i:{'|'.join(_SCALES)}))\b)?"
        rf"(?:\s?/\s?({'|'.join(PER)})\b)?(?![A-Za-z])",
        _money,
    ),
    (r"\b(\d+(?:[.,]\d{1,2})?)\s?([€¢])", _money_after),
]
