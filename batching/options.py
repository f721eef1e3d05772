"""The one parser of `key=value,key=value` option strings and the one coercer of their values,
shared by `python -m batching`, BatchingConfig and the recipe's hparams (training/hparams.py)."""

from __future__ import annotations

from typing import Any

from .errors import UserError

TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")
NONE_WORDS = ("none", "null", "")


class OptionError(UserError):
    """A malformed `key=value` item, an unknown key or a value that is not allowed; the message names the key."""


def parse_overrides(text: str) -> dict[str, str]:
    """`a=1,b=x,model.attention_dim=64` -> {'a': '1', ...}: values stay strings, empty items are
    skipped, a later key wins."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise OptionError(f"'{item}' is not of the form key=value")
        out[key.strip()] = value.strip()
    return out


def coerce(key: str, raw: Any, kind: type, optional: bool = False) -> Any:
    """`raw` (a command-line string or a YAML value) as a `kind` (bool, int, float or str);
    with `optional`, the words none/null/empty give None. Other kinds pass through unchanged."""
    text = str(raw).strip()
    if optional and (raw is None or text.lower() in NONE_WORDS):
        return None
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if text.lower() in TRUE_WORDS + FALSE_WORDS:
            return text.lower() in TRUE_WORDS
        raise OptionError(f"'{key}': '{raw}' is not a boolean (use true or false)")
    if kind is int:
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        try:
            return int(text)
        except ValueError:
            raise OptionError(f"'{key}': '{raw}' is not an integer") from None
    if kind is float:
        try:
            return float(text)
        except ValueError:
            raise OptionError(f"'{key}': '{raw}' is not a number") from None
    return text if kind is str else raw
