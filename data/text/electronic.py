"""E-mail and web addresses, read as they are spelled out: 'info@example.com' 'info at example dot com',
'https://www.x.org/a-1' 'h t t p s colon slash slash w w w dot x dot org slash a dash one'.

Letters stay words, digits are read one by one, separators are named, and what is only ever spelled
(the scheme, 'www', two-letter country domains) is spelled letter by letter.
"""

from __future__ import annotations

import re

from data.text.numbers import say_digits

_SEPARATORS = {
    ".": "dot",
    "-": "dash",
    "_": "underscore",
    "/": "slash",
    ":": "colon",
    "@": "at",
    "&": "ampersand",
    "~": "tilde",
    "?": "question mark",
    "=": "equals",
    "#": "hash",
    "%": "percent",
    "+": "plus",
}
_SPELLED = {"www", "http", "https", "ftp"}
_SAID = {"jpg": "jpeg"}
_PART = re.compile(r"[A-Za-z]+|\d+|.")
_TAIL = r"(?:/[\w.~%?=&#+/-]*[\w/])?"  # a path after the host, not its closing punctuation
_HOST = r"[A-Za-z0-9][A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)+"
_EMAIL = rf"(?<![\w.+&-])[A-Za-z0-9][\w.+&-]*@{_HOST}{_TAIL}"  # from the token's start: no quadratic scan
_URL = r"\b(?:(?:https?|ftp|file):///?|www\.)[\w.~%?=&#+/:-]*[\w/]"
#: Top-level domains read without 'www' or '@' before them: common ones that are no English word, so that
#: 'good.then' or 'it.is' (a missing space) stays prose.
_TOP_LEVEL = (
    "com|org|net|edu|gov|mil|info|biz|io|ai|app|dev|uk|de|fr|jp|cn|ru|br|au|nl|se|ch|es|eu|tv|fm|ly|"
    "sm|ca|nz|kr|pl|cz|ie|za|mx"
)
# lower-case words joined by dots ('example.org', 'test2.uk'), each at least two characters long
_DOMAIN = rf"(?<![\w.@'-])[a-z][a-z0-9-]+(?:\.[a-z0-9-]{{2,}})*\.(?:{_TOP_LEVEL})\b{_TAIL}(?![\w@])"


def say_address(text: str) -> str:
    """Any e-mail address, URL or domain name, part by part."""
    parts = _PART.findall(text)
    last_word = max((i for i, part in enumerate(parts) if part.isalpha()), default=-1)
    words = []
    for i, part in enumerate(parts):
        if part.isdigit():
            words.append(say_digits(part))
        elif part.isalpha():
            words.append(_say_word(part.lower(), top_level=i == last_word and i > 0 and parts[i - 1] == "."))
        else:
            words.append(_SEPARATORS.get(part, part))
    return " ".join(words)


def _say_word(word: str, top_level: bool) -> str:
    if word in _SPELLED or (top_level and len(word) == 2):
        return " ".join(word)
    return _SAID.get(word, word)


PATTERNS: list[tuple[str, object]] = [
    (_EMAIL, lambda m: say_address(m.group(0))),
    (_URL, lambda m: say_address(m.group(0))),
    (_DOMAIN, lambda m: say_address(m.group(0))),
]
