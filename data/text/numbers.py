"""Numbers as a person reads them: cardinals, ordinals, decimals, years, decades, fractions,
times, dates, money, percentages and Roman numerals. Each `say_*` takes digits (or a numeral)
and returns words; data.text.rules decides which applies where."""

from __future__ import annotations

import functools

MAX_DIGITS = 15  # longer digit strings (ids, phone numbers) are read digit by digit
MAX_GROUPED_DIGITS = 33  # '1,000,...': a number with thousands separators is said up to inflect's decillions
_DIGITS = "zero one two three four five six seven eight nine".split()
_FRACTIONS = {2: ("half", "halves"), 4: ("quarter", "quarters")}
_FRACTION_DENOMINATORS = {*range(2, 11), 12, 16, 20, 32, 64, 100}
_ROMAN = {"M": 1000, "D": 500, "C": 100, "L": 50, "X": 10, "V": 5, "I": 1}
MONTHS = ("january february march april may june july august september october november december").split()


@functools.cache
def _inflect():
    """inflect's engine, imported on the first number read: importing inflect takes longer than
    importing torch (typeguard instruments its functions), and most texts (the demo's) hold no number."""
    import inflect

    return inflect.engine()


@functools.lru_cache(maxsize=1 << 14)  # inflect takes about 0.1 ms a number; texts repeat theirs
def say_cardinal(n: int, max_digits: int = MAX_DIGITS) -> str:
    """'one thousand two hundred thirty-four': no 'and', no commas inside a number. A number written with
    thousands separators is a number at any length: its caller lifts max_digits."""
    if len(str(abs(n))) > max_digits:
        return say_digits(str(abs(n))) if n >= 0 else "minus " + say_digits(str(-n))
    words = _inflect().number_to_words(abs(n), andword="", comma="")
    return f"minus {words}" if n < 0 else words


def say_digits(digits: str) -> str:
    return " ".join(_DIGITS[int(d)] for d in digits)


@functools.lru_cache(maxsize=1 << 14)
def say_ordinal(n: int) -> str:
    return _inflect().number_to_words(_inflect().ordinal(n), andword="", comma="")


def ordinal_suffix(n: int) -> str:
    """'st', 'nd', 'rd' or 'th': what '1st', '22nd', '13th' end with."""
    return _inflect().ordinal(n)[-2:]


def say_decimal(whole: str, fraction: str) -> str:
    """'2.05' -> 'two point zero five'; '.5' -> 'point five'."""
    head = say_cardinal(int(whole)) + " " if whole else ""
    return f"{head}point {say_digits(fraction)}"


def say_number(text: str) -> str:
    """'1,250' 'one thousand two hundred fifty', '2.5' 'two point five': a cardinal or a decimal."""
    whole, dot, frac = text.replace(",", "").partition(".")
    return say_decimal(whole, frac) if dot else say_cardinal(int(whole))


def say_year(n: int) -> str:
    """Years as said: 1862 'eighteen sixty-two', 1905 'nineteen oh five', 1800 'eighteen hundred',
    2005 'two thousand five', 2019 'twenty nineteen'; others as cardinals."""
    if 1100 <= n < 2000 or 2010 <= n < 2100:
        century, rest = divmod(n, 100)
        if rest == 0:
            return f"{say_cardinal(century)} hundred"
        return f"{say_cardinal(century)} {'oh ' if rest < 10 else ''}{say_cardinal(rest)}"
    return say_cardinal(n)


def plural_of_number(words: str) -> str:
    """'nineteen ninety' -> 'nineteen nineties', 'eighteen hundred' -> 'eighteen hundreds'."""
    head, _, last = words.rpartition(" ")
    plural = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return f"{head} {plural}".strip()


def say_decade(digits: str) -> str:
    """'1990' of '1990s' -> 'nineteen nineties'; '90' of '90s' -> 'nineties'."""
    return plural_of_number(say_year(int(digits)) if len(digits) == 4 else say_cardinal(int(digits)))


def say_fraction(numerator: int, denominator: int) -> str:
    """'3/4' -> 'three quarters', '1/2' -> 'one half', '5/8' -> 'five eighths'."""
    one = say_ordinal(denominator).removeprefix("one ")  # 'hundredth', not 'one hundredth'
    one, many = _FRACTIONS.get(denominator, (one, one + "s"))
    return f"{say_cardinal(numerator)} {one if numerator == 1 else many}"


def say_mixed_fraction(whole: int | None, numerator: int, denominator: int) -> str:
    """'1 1/2' 'one and a half', '5/8' 'five eighths', '24/7' 'twenty-four seven', '9/13' 'nine over thirteen'."""
    if (numerator, denominator) == (24, 7) or numerator == denominator:
        return f"{say_cardinal(numerator)} {say_cardinal(denominator)}"
    if denominator not in _FRACTION_DENOMINATORS:
        spoken = f"{say_cardinal(numerator)} over {say_cardinal(denominator)}"
    elif whole and numerator == 1:
        spoken = f"a {say_fraction(1, denominator).split(' ', 1)[1]}"
    else:
        spoken = say_fraction(numerator, denominator)
    return f"{say_cardinal(whole)} and {spoken}" if whole else spoken


def say_time(hours: int, minutes: int) -> str:
    """3:30 'three thirty', 10:05 'ten oh five', 3:00 "three o'clock"."""
    if minutes == 0:
        return f"{say_cardinal(hours)} o'clock"
    return f"{say_cardinal(hours)} {'oh ' if minutes < 10 else ''}{say_cardinal(minutes)}"


def roman_value(numeral: str) -> int:
    """The value of a well-formed Roman numeral, 0 for anything else ('IIII', 'VX', 'IC')."""
    values = [_ROMAN[ch] for ch in numeral]
    total = sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))
    return total if total > 0 and to_roman(total) == numeral else 0


def to_roman(n: int) -> str:
    out = ""
    for value, numeral in (
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ):
        count, n = divmod(n, value)
        out += numeral * count
    return out
