"""English normalisation rules, applied in order to the cased text: what is written -> what is said.

Each rule is a compiled pattern and a function of its match; the order matters (addresses before
numbers, money before decimals, times before plain numbers, Roman numerals and 'St.' while the case
still tells names). A class with rules of its own has its module (dates, times, money, measures,
electronic, telephone, addresses, symbols); this one holds the order and the rest.
"""

from __future__ import annotations

import re

import data.text.addresses as addresses
import data.text.dates as dates
import data.text.electronic as electronic
import data.text.measures as measures
import data.text.money as money
import data.text.numbers as n
import data.text.symbols as symbols
import data.text.telephone as telephone
import data.text.times as times

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"  # '1,250.5': thousands separators allowed
_ORDINAL = re.compile(r"(\d+)((?i:st|nd|rd|th))")
_YEAR_WORDS = (
    "in|since|of|by|from|until|till|to|before|after|during|year|around|circa|early|late|mid|"
    "spring|summer|autumn|fall|winter"
)  # a month before a year: data/text/dates.py
#: Words after which a Roman numeral is a plain number: 'Chapter IV' 'chapter four'.
_COUNTED = {
    "chapter",
    "part",
    "book",
    "volume",
    "vol",
    "act",
    "scene",
    "section",
    "article",
    "psalm",
    "appendix",
    "canto",
    "episode",
    "phase",
    "stage",
    "type",
    "class",
    "level",
    "war",
    "round",
    "apollo",
    "bowl",
}
#: Names whose single-letter numeral is regnal ('George I', 'Henry V'); two letters and more need no list.
_REGNAL = {
    "henry",
    "edward",
    "george",
    "charles",
    "james",
    "william",
    "richard",
    "louis",
    "elizabeth",
    "mary",
    "john",
    "paul",
    "pius",
    "benedict",
    "gregory",
    "leo",
    "innocent",
    "clement",
    "alexander",
    "frederick",
    "philip",
    "ferdinand",
    "peter",
    "catherine",
    "napoleon",
    "nicholas",
    "alfonso",
    "victor",
    "francis",
    "joseph",
    "anne",
    "stephen",
    "david",
    "robert",
    "harold",
    "ivan",
    "otto",
    "urban",
    "boniface",
    "rudolf",
}


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


def _fraction(match: re.Match) -> str:
    whole = match.group(1)
    return n.say_mixed_fraction(int(whole) if whole else None, int(match.group(2)), int(match.group(3)))


def _word_slash(match: re.Match) -> str:
    """'he/she' 'he or she', 'a/b/c' 'a or b or c'; 'and/or' 'and or', 'either/or' 'either or'."""
    words = re.split(r"\s?/\s?", match.group(0))
    if len(words) == 2 and (words[0].lower() == "and" or words[1].lower() == "or"):
        return " ".join(words)
    return " or ".join(words)


def _ordinal(match: re.Match) -> str:
    return _say_ordinal(match.group(1), match.group(2))


def _say_ordinal(number: str, suffix: str) -> str:
    """'1,000th' 'one thousandth'; a suffix that does not fit the number is read apart ('4rd' 'four r d')."""
    value, suffix = int(number.replace(",", "")), suffix.lower()
    if n.ordinal_suffix(value) == suffix:
        return n.say_ordinal(value)
    return f"{n.say_cardinal(value)} {' '.join(suffix)}"


def _code(match: re.Match) -> str:
    """A code of letters and numbers joined by dashes, its numbers said where they stand, so that no dash
    becomes 'to' or 'minus': 'b-c-1-5' 'b-c-one-five', 'covid-19' 'covid-nineteen', '2nd-rate' 'second-rate'."""
    return "-".join(_say_part(part) for part in match.group(0).split("-"))


def _say_part(part: str) -> str:
    ordinal = _ORDINAL.fullmatch(part)
    if part.isdigit():
        return _say_integer(part)
    return _say_ordinal(ordinal.group(1), ordinal.group(2)) if ordinal else part


def _number(match: re.Match) -> str:
    return _say_integer(match.group(0))


def _say_integer(digits: str) -> str:
    if (len(digits) > 1 and digits.startswith("0")) or len(digits) > n.MAX_DIGITS:
        return n.say_digits(digits)  # '007', '0800', ids: said digit by digit
    value = int(digits)
    return n.say_year(value) if 1100 <= value < 2000 else n.say_cardinal(value)


def _range(m: re.Match) -> str:
    """A dash between two numbers is a range, 'to' ('2-5', '1980-1970 kg', '1960-80', '2020-21'), unless
    the second number is both smaller and shorter and no year is shortened: then it joins the parts of
    a code ('978-0'), said with a pause."""
    first, second = m.groups()
    shortened_year = len(first) == 4 and len(second) == 2
    code = int(second) < int(first) and len(second) < len(first) and not shortened_year
    return f"{first}{', ' if code else ' to '}{second}"


_PATTERNS: list[tuple[str, object]] = [
    *electronic.PATTERNS,  # before '@' and '.' are read as words and numbers
    *telephone.PATTERNS,  # before dashes between numbers are ranges
    *addresses.PATTERNS,  # before 'St.' is 'saint' and house numbers are years
    # Roman numerals and 'St.', while the case still tells names apart
    (r"\b([A-Z][a-z]+|[A-Z]{2,})\s+([IVXL]+)(?='s\b|[^\w']|$)(?=(\.?\s+[A-Z])?)", _roman),
    (r"(\b\w+\s)?\bSt\.(?=(\s+[A-Z])?)", _saint_or_street),
    (r"\bNo\.\s?(?=\d)", "number "),
    (r"\b([Pp]p?)\.\s?(?=\d)", lambda m: "pages " if m.group(1).lower() == "pp" else "page "),
    (r"#(?=\d)", "number "),
    *dates.PATTERNS,
    *times.PATTERNS,
    (r"(?<![\d:])(\d+):(\d+)(?![\d:])", lambda m: " to ".join(n.say_cardinal(int(g)) for g in m.groups())),  # '16:9'
    (r"(?<=\d0s)\s?[-–]\s?(?=['’]?\d*0s)", " to "),  # '1960s-80s'
    # decades before units ('1990s' is no number of seconds)
    (r"\b(1[1-9]\d0|20[0-9]0)\s?['’]?s\b", lambda m: n.say_decade(m.group(1))),
    (r"(?<![\w])['’]?([1-9]0)['’]?s\b", lambda m: n.say_decade(m.group(1))),
    # money, percentages, units
    *money.PATTERNS,
    (rf"(?<![\w.])(-)?({_NUM})\s?%", lambda m: f"{'minus ' if m.group(1) else ''}{n.say_number(m.group(2))} percent"),
    (r"(?<=\d)\s?[x×]\s?(?=\d)", " by "),
    *measures.PATTERNS,
    # codes, equations and ranges before years ('2020-21'), then years, ordinals, fractions, signs
    # a code of letters and digits joined by dashes ('b-c-1-5', 'covid-19'): no range, no minus
    (r"(?<![\w.-])(?=[\w-]*[A-Za-z])(?=[\w-]*\d)\w+(?:-\w+)+(?![\w-]|\.\d)", _code),
    *symbols.MATH,
    (r"(?<![\w.,])(\d+)\s?[-–]\s?(\d+)\b(?![.,]\d)", _range),
    (r"(?<=\d)\s?[-–]\s?(?=\d)", " to "),
    (rf"\b({_YEAR_WORDS})\s+(20[1-9]\d)\b(?![.,]\d)", lambda m: f"{m.group(1)} {n.say_year(int(m.group(2)))}"),
    (r"(?<![\w/])(\d+)/(\d+)(?i:st|nd|rd|th)\b", lambda m: n.say_mixed_fraction(None, *map(int, m.groups()))),
    (r"\b(\d{1,3}(?:,\d{3})+|\d+)((?i:st|nd|rd|th))\b", _ordinal),
    (r"(?<![\w/])(?:(\d+)\s+)?(\d+)/(\d+)(?![\w/])", _fraction),
    (r"\b([A-Za-z]+)(?:\s?/\s?[A-Za-z]+)+\b", _word_slash),
    (r"(?<=\d)\s?/\s?(?=\w)|(?<=\w)\s?/\s?(?=\d)", " slash "),  # '31/31/100', '1/f': no fraction, no date
    (r"\bv(\d+(?:\.\d+)+)\b", lambda m: "version " + " point ".join(map(n.say_number, m.group(1).split(".")))),
    (r"(?<![\w.-])[-−](?=\d)", "minus "),
    (r"(?<![\w.])\+(?=\d)", "plus "),
    (r"(?<![\w.])~(?=\d)", "about "),
    (r"(?<=\d)[x×](?=\s)", " times"),
    (r"(?<=\d)(?=[A-Za-z])|(?<=[A-Za-z])(?=\d)", " "),  # 'B12', 'Y2K', '4.4x': letters and digits apart
    # thousands separators: never a year, and a number at any length
    (r"\b\d{1,3}(?:,\d{3})+\b", lambda m: n.say_cardinal(int(m.group(0).replace(",", "")), n.MAX_GROUPED_DIGITS)),
    (r"(\d*)\.(\d+)", lambda m: n.say_decimal(m.group(1), m.group(2))),
    (r"\d+", _number),
    # symbols
    *symbols.PATTERNS,
]
#: (pattern, reading, whether it needs a digit): a rule whose pattern names a digit is skipped in a text without
#: one (most transcripts), which keeps the front end fast; rules write words, never digits.
RULES: list[tuple[re.Pattern, object, bool]] = [(re.compile(p), then, "\\d" in p) for p, then in _PATTERNS]

#: Abbreviations read after lower-casing, wherever they stand (NVIDIA's list, and a few more).
ABBREVIATIONS = {
    "mrs": "missus",
    "mr": "mister",
    "drs": "doctors",
    "dr": "doctor",
    "co": "company",
    "jr": "junior",
    "maj": "major",
    "gen": "general",
    "rev": "reverend",
    "lt": "lieutenant",
    "hon": "honorable",
    "sgt": "sergeant",
    "capt": "captain",
    "esq": "esquire",
    "ltd": "limited",
    "col": "colonel",
    "ft": "fort",
    "st": "saint",
    "vs": "versus",
    "etc": "et cetera",
    "approx": "approximately",
    "dept": "department",
    "inc": "incorporated",
    "corp": "corporation",
    "prof": "professor",
    "ave": "avenue",
    "blvd": "boulevard",
    "vol": "volume",
    "fig": "figure",
    "figs": "figures",
    "eq": "equation",
    "eqs": "equations",
}
_SPELLED = {
    "e.g.": "for example",
    "i.e.": "that is",
    "401(k)": "four oh one k",
    "403(b)": "four oh three b",
    "Rd.": "road",
    "Mt.": "mount",
    "Ms.": "miz",
    "Sr.": "senior",
    "Sen.": "senator",
    "km/h": "kilometers per hour",
    "9/11": "nine eleven",
    "Gov.": "governor",
    "Rep.": "representative",
    "Sens.": "senators",
    "Reps.": "representatives",
}
#: Case-sensitive ones (capitalised: a lower-case 'rd.' or 'ms.' is left alone) and those with inner dots.
SPELLED = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, _SPELLED)) + r")(?![\w])")
ABBREVIATION = re.compile(r"\b(" + "|".join(ABBREVIATIONS) + r")\.", re.IGNORECASE)


def apply_rules(text: str) -> str:
    """The cased text with numbers, dates, times, money, units, symbols and case-bound abbreviations said."""
    text = SPELLED.sub(lambda m: _SPELLED[m.group(1)], text)
    has_digit = any(ch.isdigit() for ch in text)
    for pattern, then, needs_digit in RULES:
        if has_digit or not needs_digit:
            text = pattern.sub(then, text)
    return text


def expand_abbreviations(text: str) -> str:
    return ABBREVIATION.sub(lambda m: ABBREVIATIONS[m.group(1).lower()], text)
