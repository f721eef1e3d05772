"""Times of day: '3:30' 'three thirty', '10:05 pm' 'ten oh five p m', '6 a.m.' 'six a m', '1:59 p.m. EST'
'one fifty-nine p m e s t', '14:10:30' 'fourteen hours ten minutes and thirty seconds', '2pm-5pm'
'two p m to five p m'."""

from __future__ import annotations

import re

import data.text.numbers as n

_MERIDIEM = r"(?:([APap])(?:\.\s?[Mm]\b\.?|\s?[Mm]\b))"
_ZONE = r"(?:\s?((?i:[ecmp]\.?[sd]\.?t|gmt|utc|bst|cet)\b\.?))?"


def _time(match: re.Match) -> str:
    hours, minutes = int(match.group(1)), int(match.group(2))
    if hours > 24 or minutes > 59:
        return match.group(0)
    if match.group(3):
        said = n.say_cardinal(hours) if minutes == 0 else n.say_time(hours, minutes)
        return f"{said} {_meridiem(match, 3)}"
    return n.say_time(hours, minutes)


def _hour(match: re.Match) -> str:
    return f"{n.say_cardinal(int(match.group(1)))} {_meridiem(match, 2)}"


def _with_seconds(match: re.Match) -> str:
    """'1:01:01' 'one hour one minute and one second'."""
    hours, minutes, seconds = (int(match.group(i)) for i in (1, 2, 3))
    if hours > 24 or minutes > 59 or seconds > 59:
        return match.group(0)
    hours_, minutes_, seconds_ = (
        f"{n.say_cardinal(value)} {one if value == 1 else one + 's'}"
        for value, one in ((hours, "hour"), (minutes, "minute"), (seconds, "second"))
    )
    said = f"{hours_} {minutes_} and {seconds_}"
    return f"{said} {_meridiem(match, 4)}".rstrip() if match.group(4) else said


def _duration(match: re.Match) -> str:
    """'3h 45m' 'three hours forty-five minutes' (an 'm' after hours is minutes, not meters)."""
    said = []
    for value, one in zip(match.groups(), ("hour", "minute", "second")):
        if value:
            said.append(f"{n.say_cardinal(int(value))} {one if value == '1' else one + 's'}")
    return " ".join(said)


def _meridiem(match: re.Match, group: int) -> str:
    """'p m', a time zone spelled after it ('p m e s t'), and the '.' of 'p.m.' that also ends the
    sentence (the text ends, or a capital follows)."""
    zone = match.group(group + 1)
    said = f"{match.group(group).lower()} m" + (" " + " ".join(zone.replace(".", "").lower()) if zone else "")
    after = match.string[match.end() :].lstrip()
    return said + ("." if match.group(0).endswith(".") and (not after or after[0].isupper()) else "")


PATTERNS: list[tuple[str, object]] = [
    (rf"(?:(?<=[APap][Mm])|(?<=[Mm]\.))\s?[-–]\s?(?=\d{{1,2}}(?::\d\d)?\s?{_MERIDIEM})", " to "),  # '2pm-5pm'
    (r"\b(\d+)\s?h\s?(\d{1,2})\s?m(?:in)?\b(?:\s?(\d{1,2})\s?s\b)?", _duration),
    (rf"\b(\d{{1,2}}):(\d{{2}}):(\d{{2}})(?!\d)(?:\s?{_MERIDIEM}{_ZONE})?", _with_seconds),
    (rf"\b(\d{{1,2}})\.(\d{{2}})\s?{_MERIDIEM}{_ZONE}", _time),  # '1.59 p.m.': a dot only before a meridiem
    (rf"\b(\d{{1,2}}):(\d{{2}})(?!\d)(?:\s?{_MERIDIEM}{_ZONE})?", _time),
    (rf"\b(\d{{1,2}})\s?{_MERIDIEM}{_ZONE}", _hour),
]
