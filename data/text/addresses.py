"""Street addresses: '1428 Elm St.' 'fourteen twenty-eight Elm street', '708 N 1st St, San City, CA 95051'
'seven oh eight north first street, San City, California nine five zero five one'. The house number is
read in pairs, the direction, street type and state said in full, the ZIP code digit by digit (also after
a state's code alone: 'St. Louis, MO 63101')."""

from __future__ import annotations

import re

import data.text.numbers as n

_STREETS = {
    "st": "street",
    "ave": "avenue",
    "ct": "court",
    "expy": "expressway",
    "hwy": "highway",
    "rd": "road",
    "blvd": "boulevard",
    "ln": "lane",
    "pl": "place",
    "pkwy": "parkway",
    "dr": "drive",
    "ter": "terrace",
}
_DIRECTIONS = {
    "N": "north",
    "S": "south",
    "E": "east",
    "W": "west",
    "NE": "northeast",
    "NW": "northwest",
    "SE": "southeast",
    "SW": "southwest",
}
STATES = {
    "AL": "Alabama",
    "AK": "Alaska",
    "AZ": "Arizona",
    "AR": "Arkansas",
    "CA": "California",
    "CO": "Colorado",
    "CT": "Connecticut",
    "DE": "Delaware",
    "FL": "Florida",
    "GA": "Georgia",
    "HI": "Hawaii",
    "ID": "Idaho",
    "IL": "Illinois",
    "IN": "Indiana",
    "IA": "Iowa",
    "KS": "Kansas",
    "KY": "Kentucky",
    "LA": "Louisiana",
    "ME": "Maine",
    "MD": "Maryland",
    "MA": "Massachusetts",
    "MI": "Michigan",
    "MN": "Minnesota",
    "MS": "Mississippi",
    "MO": "Missouri",
    "MT": "Montana",
    "NE": "Nebraska",
    "NV": "Nevada",
    "NH": "New Hampshire",
    "NJ": "New Jersey",
    "NM": "New Mexico",
    "NY": "New York",
    "NC": "North Carolina",
    "ND": "North Dakota",
    "OH": "Ohio",
    "OK": "Oklahoma",
    "OR": "Oregon",
    "PA": "Pennsylvania",
    "RI": "Rhode Island",
    "SC": "South Carolina",
    "SD": "South Dakota",
    "TN": "Tennessee",
    "TX": "Texas",
    "UT": "Utah",
    "VT": "Vermont",
    "VA": "Virginia",
    "WA": "Washington",
    "WV": "West Virginia",
    "WI": "Wisconsin",
    "WY": "Wyoming",
    "DC": "D C",
}
_STREET = rf"(?i:{'|'.join(_STREETS)})"
_NAME = r"(?:[A-Z][a-z]+|\d{1,3}(?:st|nd|rd|th))"
_ADDRESS = (
    rf"\b(\d{{1,5}})\s+(?:({'|'.join(_DIRECTIONS)})\s+)?({_NAME}(?:\s+[A-Z][a-z]+){{0,2}})\s+({_STREET})\b\.?"
    rf"((?:,\s+[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)*)(?:,\s+({'|'.join(STATES)})\b)?(?:,?\s+(\d{{5}})\b)?"
)


def say_house_number(digits: str) -> str:
    """In pairs, as a house number is said: '2788' 'twenty-seven eighty-eight', '123' 'one twenty-three'."""
    if len(digits) < 3 or len(digits) > 4 or digits[-2:] == "00":
        return n.say_cardinal(int(digits))
    head, tail = digits[:-2], int(digits[-2:])
    return f"{n.say_cardinal(int(head))} {'oh ' if tail < 10 else ''}{n.say_cardinal(tail)}"


def _address(match: re.Match) -> str:
    number, direction, name, street, places, state, code = match.groups()
    after = match.string[match.end() :].lstrip()
    if street.lower() == "dr" and after[:1].isupper():
        return match.group(0)  # 'in 2005 Smith Dr. Jones said': a title before a name, not a drive
    said = [say_house_number(number), _DIRECTIONS.get(direction, ""), name, _STREETS[street.lower()]]
    text = " ".join(word for word in said if word) + (places or "") + (f", {STATES[state]}" if state else "")
    text += f", {n.say_digits(code)}" if code else ""
    after = match.string[match.end() :].lstrip()
    return text + ("." if match.group(0).endswith(".") and (not after or after[0].isupper()) else "")


PATTERNS: list[tuple[str, object]] = [
    (_ADDRESS, _address),
    (rf"\b({'|'.join(STATES)}) (\d{{5}})\b", lambda m: f"{STATES[m.group(1)]}, {n.say_digits(m.group(2))}"),
]
