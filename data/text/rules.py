"""English normalisation rules, applied in order to the cased text: what is written -> what is said.

Each rule is a compiled pattern and a function of its match; the order matters (money before
decimals, times before plain numbers, Roman numerals and 'St.' while the case still tells names).
"""
from __future__ import annotations

import re

import data.text.numbers as n
from data.text import dates, electronic, telephone, times
from data.text.units import UNITS

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"  # '1,250.5': thousands separators allowed
_MONTH_NAMES = "|".join(month.capitalize() for month in n.MONTHS)
_YEAR_WORDS = ("in|since|of|by|from|until|till|to|before|after|during|year|around|circa|early|late|mid|"
               "spring|summer|autumn|fall|winter|" + _MONTH_NAMES)
#: Words after which a Roman numeral is a plain number: 'Chapter IV' 'chapter four'.
_COUNTED = {"chapter", "part", "book", "volume", "vol", "act", "scene", "section", "article", "psalm", "appendix",
            "canto", "episode", "phase", "stage", "type", "class", "level", "war", "round", "apollo", "bowl"}
#: Names whose single-letter numeral is regnal ('George I', 'Henry V'); two letters and more need no list.
_REGNAL = {"henry", "edward", "george", "charles", "james", "william", "richard", "louis", "elizabeth", "mary", "john",
           "paul", "pius", "benedict", "gregory", "leo", "innocent", "clement", "alexander", "frederick", "philip",
           "ferdinand", "peter", "catherine", "napoleon", "nicholas", "alfonso", "victor", "francis", "joseph", "anne",
           "stephen", "david", "robert", "harold", "ivan", "otto", "urban", "boniface", "rudolf"}
_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence"),
               "€": ("euro", "euros", "cent", "cents"), "¥": ("yen", "yen", "", "")}
_SCALES = {"thousand": "thousand", "k": "thousand", "million": "million", "m": "million", "mn": "million",
           "billion": "billion", "bn": "billion", "b": "billion", "trillion": "trillion", "tn": "trillion"}
_FRACTION_DENOMINATORS = {*range(2, 11), 12, 16, 20, 32, 64, 100}


def _roman(match: re.Match) -> str:
    name, numeral = match.group(1), match.group(2)
    value = n.roman_value(numeral)
    if not value or value > 40:
        return match.group(0)
    if name.lower() in _COUNTED:
        return f"{name} {n.say_cardinal(value)}"
    if len(numeral) > 1 or (name.lower() in _REGNAL and not match.group(3)):  # 'Robert I. Bouck': an initial
        return f"{name} the {n.say_ordinal(value)}"
    return match.group(0)


def _saint_or_street(match: re.Match) -> str:
    """'St.' is 'street' after a name or a number and before no name ('Main St.', '5th St. in'),
    'saint' elsewhere ('St. James', 'Bury St. Edmunds')."""
    before = match.group(1)
    street = bool(before) and (before[0].isupper() or before[0].isdigit()) and not match.group(2)
    return f"{before or ''}{'street' if street else 'saint'}"


def _money(match: re.Match) -> str:
    """'$5.50' -> 'five dollars, fifty cents'; '$2.5bn' -> 'two point five billion dollars'."""
    return _say_money(match.group(2), match.group(3), match.group(4), minus=bool(match.group(1)))


def _money_after(match: re.Match) -> str:
    """'20 €' and '50¢': the symbol after the amount (a decimal comma allowed)."""
    amount, symbol = match.group(1).replace(",", "."), match.group(2)
    if symbol == "¢":
        return f"{_say_number(amount)} {'cent' if amount == '1' else 'cents'}"
    return _say_money(symbol, amount, None, minus=False)


def _say_money(symbol: str, amount: str, scale: str | None, minus: bool) -> str:
    one, many, sub_one, sub_many = _CURRENCIES[symbol]
    sign = "minus " if minus else ""
    if scale or not sub_one:  # a scale ('5 million dollars'), or yen: no smaller unit
        return f"{sign}{_say_number(amount)}{' ' + _SCALES[scale.lower()] if scale else ''} {many}"
    whole, _, frac = amount.replace(",", "").partition(".")
    major, minor = int(whole), int(frac.ljust(2, "0")[:2]) if frac else 0
    parts = []
    if major or not minor:
        parts.append(f"{n.say_cardinal(major)} {one if major == 1 else many}")
    if minor:
        parts.append(f"{n.say_cardinal(minor)} {sub_one if minor == 1 else sub_many}")
    return sign + ", ".join(parts)


def _say_number(text: str) -> str:
    whole, dot, frac = text.replace(",", "").partition(".")
    return n.say_decimal(whole, frac) if dot else n.say_cardinal(int(whole))


def _unit(match: re.Match) -> str:
    sign, amount, unit = match.group(1), match.group(2), match.group(3)
    one, many = UNITS[unit]
    spoken = ("minus " if sign else "") + _say_number(amount)
    return f"{spoken} {one if amount == '1' else many}"


def _fraction(match: re.Match) -> str:
    whole, numerator, denominator = match.group(1), int(match.group(2)), int(match.group(3))
    if (numerator, denominator) == (24, 7) or numerator == denominator:
        return f"{n.say_cardinal(numerator)} {n.say_cardinal(denominator)}"
    if denominator not in _FRACTION_DENOMINATORS:
        spoken = f"{n.say_cardinal(numerator)} over {n.say_cardinal(denominator)}"
    elif whole and numerator == 1:
        spoken = f"a {n.say_fraction(1, denominator).split(' ', 1)[1]}"
    else:
        spoken = n.say_fraction(numerator, denominator)
    return f"{n.say_cardinal(int(whole))} and {spoken}" if whole else spoken


def _word_slash(match: re.Match) -> str:
    """'he/she' 'he or she'; 'and/or' 'and or', 'either/or' 'either or'."""
    first, second = match.group(1), match.group(2)
    return f"{first} {second}" if first.lower() == "and" or second.lower() == "or" else f"{first} or {second}"


def _number(match: re.Match) -> str:
    digits = match.group(0)
    if len(digits) > 1 and digits.startswith("0"):
        return n.say_digits(digits)  # '007', '0800': said digit by digit
    value = int(digits)
    return n.say_year(value) if 1100 <= value < 2000 else n.say_cardinal(value)


_PATTERNS: list[tuple[str, object]] = [
    *electronic.PATTERNS,  # before '@' and '.' are read as words and numbers
    *telephone.PATTERNS,  # before dashes between numbers are ranges
    # Roman numerals and 'St.', while the case still tells names apart
    (r"\b([A-Z][a-z]+)\s+([IVXL]+)(?='s\b|[^\w']|$)(?=(\.?\s+[A-Z])?)", _roman),
    (r"(\b\w+\s)?\bSt\.(?=(\s+[A-Z])?)", _saint_or_street),
    (r"\bNo\.\s?(?=\d)", "number "),
    (r"#(?=\d)", "number "),
    *dates.PATTERNS,
    *times.PATTERNS,
    # decades before units ('1990s' is no number of seconds)
    (r"\b(1[1-9]\d0|20[0-9]0)['’]?s\b", lambda m: n.say_decade(m.group(1))),
    (r"(?<![\w])['’]?([1-9]0)['’]?s\b", lambda m: n.say_decade(m.group(1))),
    # money, percentages, units
    (rf"(-)?([$£€¥])\s?({_NUM})(?:\s?({'|'.join(_SCALES)})\b)?", _money),
    (r"\b(\d+(?:[.,]\d{1,2})?)\s?([€¢])", _money_after),
    (rf"(?<![\w.])(-)?({_NUM})\s?%", lambda m: f"{'minus ' if m.group(1) else ''}{_say_number(m.group(2))} percent"),
    (rf"(?<![\w.])(-)?({_NUM})\s?({'|'.join(map(re.escape, sorted(UNITS, key=len, reverse=True)))})(?![\w°])",
     _unit),
    # years, ordinals, fractions, ranges, signs
    (rf"\b({_YEAR_WORDS})\s+(20[1-9]\d)\b(?![.,]\d)", lambda m: f"{m.group(1)} {n.say_year(int(m.group(2)))}"),
    (r"\b(\d+)(?:st|nd|rd|th)\b", lambda m: n.say_ordinal(int(m.group(1)))),
    (r"(?<![\w/])(?:(\d+)\s+)?(\d+)/(\d+)(?![\w/])", _fraction),
    (r"(?<=\d)\s?[-–]\s?(?=\d)", " to "),
    (r"(?<![\w.-])[-−](?=\d)", "minus "),
    (r"(?<![\w.])\+(?=\d)", "plus "),
    (r"(?<![\w.])~(?=\d)", "about "),
    (r"(?<=\d)\s?[x×]\s?(?=\d)", " by "),
    (r"(?<=\d)[x×](?=\s)", " times"),
    (r"\b\d{1,3}(?:,\d{3})+\b", lambda m: n.say_cardinal(int(m.group(0).replace(",", "")))),  # never a year
    (r"(\d*)\.(\d+)", lambda m: n.say_decimal(m.group(1), m.group(2))),
    (r"\d+", _number),
    # symbols and slashes between words
    (r"\s*&\s*", " and "),
    (r"\s*@\s*", " at "),
    (r"\s+\+\s+", " plus "),
    (r"\s+=\s+", " equals "),
    (r"\b([A-Za-z]+)/([A-Za-z]+)\b", _word_slash),
    (r"°", " degrees "),
]
RULES: list[tuple[re.Pattern, object]] = [(re.compile(pattern), then) for pattern, then in _PATTERNS]

#: Abbreviations read after lower-casing, wherever they stand (NVIDIA's list, and a few more).
ABBREVIATIONS = {
    "mrs": "missus", "mr": "mister", "drs": "doctors", "dr": "doctor", "co": "company", "jr": "junior",
    "maj": "major", "gen": "general", "rev": "reverend", "lt": "lieutenant", "hon": "honorable", "sgt": "sergeant",
    "capt": "captain", "esq": "esquire", "ltd": "limited", "col": "colonel", "ft": "fort", "st": "saint",
    "vs": "versus", "etc": "et cetera", "approx": "approximately", "dept": "department", "inc": "incorporated",
    "corp": "corporation", "prof": "professor", "ave": "avenue", "blvd": "boulevard", "vol": "volume", "fig": "figure",
}
_SPELLED = {"e.g.": "for example", "i.e.": "that is", "Rd.": "road", "Mt.": "mount", "Ms.": "miz",
            "Sr.": "senior"}
#: Case-sensitive ones (capitalised: a lower-case 'rd.' or 'ms.' is left alone) and those with inner dots.
SPELLED = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, _SPELLED)) + r")(?![\w])")
ABBREVIATION = re.compile(r"\b(" + "|".join(ABBREVIATIONS) + r")\.", re.IGNORECASE)


def apply_rules(text: str) -> str:
    """The cased text with numbers, dates, times, money, units, symbols and case-bound abbreviations said."""
    text = SPELLED.sub(lambda m: _SPELLED[m.group(1)], text)
    for pattern, then in RULES:
        text = pattern.sub(then, text)
    return text


def expand_abbreviations(text: str) -> str:
    return ABBREVIATION.sub(lambda m: ABBREVIATIONS[m.group(1).lower()], text)
