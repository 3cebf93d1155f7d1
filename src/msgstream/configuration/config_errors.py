"""Pydantic's validation errors as :class:`~msgstream.errors.ConfigError`: one table.

Every problem a key can have is worded once, in :data:`PROBLEMS`, keyed by pydantic's
error type (plus two of our own: ``null`` for a missing value and ``mapping_key`` for a
bad key inside a pass-through map). The error names the full dotted key, e.g.
``kafka.producer.linger``; rules spanning several keys raise their ``ConfigError``
directly from the section's model validator and pass through unchanged.

No text shows the value of a secret key (:attr:`ConfigKey.secret`), of a pass-through
entry whose name says it is a secret, or of a whole pass-through map that is no mapping:
their problems show the mask and the value's type instead, whatever the template says.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ..brief import brief
from ..errors import ConfigError
from .config_keys import MASK, ConfigKey, names_a_secret

__all__ = ["MASK_GIVEN", "PROBLEMS", "config_error", "describe", "unknown_key"]

MASK_GIVEN = (
    f"{MASK!r} is what a shown configuration has in place of a secret "
    "(to_dict() masks them): give the secret itself"
)
"""The problem of a secret given as the mask: copied from a shown configuration."""

PROBLEMS: dict[str, str] = {
    "null": "must not be null (expected {expected})",
    "int_type": "expected an integer, got {got}",
    "float_type": "expected a number, got {got}",
    "bool_type": "expected a boolean, got {got}",
    "string_type": "expected a string, got {got}",
    "dict_type": "expected a mapping, got {got}",
    "scalar_expected": "expected a string, number or boolean, got {got}",
    "mapping_key": "keys must be non-empty strings, got {got}",
    "finite_number": "expected a finite number, got {value}",
    "string_too_short": "must not be empty",
    "greater_than_equal": "out of range: got {value}, expected {expected}",
    "greater_than": "out of range: got {value}, expected {expected}",
    "literal_error": "invalid value {value}: must be one of {choices}{hint}",
    "secret_entry_type": f"expected a string (its name says it is a secret), got {MASK} ({{kind}})",
    "secret_entry_mask": MASK_GIVEN,
    "address_credentials": (
        "holds credentials (before '@'): an address is shown in errors and logs, and the "
        "client reads none from it; give them in {use}"
    ),
}
"""Error type -> problem text. Fields: ``got`` (value and type), ``value`` (the value),
``expected`` (the key's type and range), ``choices`` and ``hint`` (for choice keys), and
whatever the error's context holds (``kind``: a value's type, ``use``: where credentials
go)."""

_TYPE_ERRORS = frozenset({"int_type", "float_type", "bool_type", "string_type", "dict_type"})


def describe(value: object, *, secret: bool = False) -> str:
    """A bounded description of a value and its type (a document may nest very deep); a
    ``secret`` one shows the mask in place of the value."""
    return f"{MASK if secret else brief(value)} ({type(value).__name__})"


def unknown_key(key: str, candidates: Sequence[str]) -> ConfigError:
    """An unknown key or section, with the closest known one, else all of them."""
    close = difflib.get_close_matches(key, candidates, n=1)
    if close:
        return ConfigError(key, f"unknown key; did you mean {close[0]!r}?")
    return ConfigError(key, "unknown key; known keys: " + ", ".join(sorted(candidates)))


def config_error(exc: ValidationError, section: str, keys: Mapping[str, ConfigKey]) -> ConfigError:
    """The first of ``exc``'s errors as a ConfigError naming ``section.<key>``; ``keys``
    describes the section's keys by name."""
    error = exc.errors(include_url=False)[0]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):  # a rule spanning several keys
        return cause
    loc = [str(part) for part in error["loc"]]
    if not loc:
        return ConfigError(section, _problem(error["type"], error, None, secret=False))
    entry = (error.get("ctx") or {}).get("name")
    if entry is not None:  # a pass-through entry judged with its name, by the whole map
        loc.append(str(entry))
    dotted = ".".join([section, *loc])
    key = keys.get(loc[0])
    if error["type"] == "extra_forbidden" or key is None:
        return unknown_key(dotted, [k.dotted for k in keys.values()])
    kind = error["type"]
    # A map's entry is shown unless its name says secret; a value given for the whole
    # map, which may be anything (a secret's text too), is not.
    secret = key.secret or (key.may_hold_secret and (len(loc) == 1 or names_a_secret(loc[1])))
    if loc[-1] == "[key]":
        dotted, kind, secret = key.dotted, "mapping_key", False  # shows the key, not a value
    elif kind in _TYPE_ERRORS and error["input"] is None:
        kind = "null"
    elif kind in _TYPE_ERRORS and key.choices:
        kind = "literal_error"
    return ConfigError(dotted, _problem(kind, error, key, secret=secret))


def _problem(kind: str, error: ErrorDetails, key: ConfigKey | None, *, secret: bool) -> str:
    value = error["input"]
    shown = MASK if secret else brief(value)
    template = PROBLEMS.get(kind)
    if template is None:  # not worded here: pydantic's own message, still naming the key
        return f"invalid value {shown}: {error['msg']}"
    choices = key.choices if key is not None else ()
    close = difflib.get_close_matches(value, choices, n=1) if isinstance(value, str) else []
    return template.format_map(
        {
            **(error.get("ctx") or {}),
            "got": describe(value, secret=secret),
            "value": shown,
            "expected": key.type_text() if key is not None else "",
            "choices": ", ".join(repr(c) for c in choices),
            "hint": f"; did you mean {close[0]!r}?" if close else "",
        }
    )
