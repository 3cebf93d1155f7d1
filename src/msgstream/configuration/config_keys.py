"""What one configuration key is, as derived from a field of a pydantic section model.

The description (dotted name, environment variable, type and range, default, one-line
doc) drives the environment mapping, the error texts and the generated configuration
reference, so a section declares each key once: as a typed attribute with its default,
its constraints (``ge``/``gt``) and a docstring, plus :class:`Special` for values
accepted outside the range (e.g. -1 meaning "keep forever").

A key typed ``SecretStr`` (pydantic's) is a *secret*: that type alone makes it masked
wherever a configuration is shown (pydantic's ``repr``, ``str`` and JSON dumps,
:meth:`~msgstream.configuration.config.Config.to_dict`, error texts) and read from its environment
variable as text; code that builds a client reveals it with :func:`reveal`.

A pass-through map (keys handed to a broker library as they are, e.g. ``kafka.confluent``)
cannot type its entries, so there an entry is a secret by its *name*
(:func:`names_a_secret`): its value is a ``SecretStr`` from the moment it is read, and
:func:`revealed` gives the map back with the real values to the code that builds a client.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import UnionType
from typing import Any, Literal, cast, overload

import annotated_types
from pydantic import BaseModel, GetCoreSchemaHandler, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema, core_schema

__all__ = [
    "ENV_PREFIX",
    "MASK",
    "ConfigKey",
    "Special",
    "describe_field",
    "hidden",
    "names_a_secret",
    "reveal",
    "revealed",
    "secrets_of",
]

ENV_PREFIX = "MSGSTREAM_"

MASK = str(SecretStr("secret"))
"""What a secret key's value shows wherever it is printed (pydantic's mask)."""


@overload
def reveal(secret: SecretStr) -> str: ...
@overload
def reveal(secret: SecretStr | None) -> str | None: ...
def reveal(secret: SecretStr | None) -> str | None:
    """A secret key's text, for the code that hands it to a broker library."""
    return None if secret is None else secret.get_secret_value()


SECRET_NAME = re.compile(
    r"(?:^|[._-]|(?<=[a-z0-9])(?=[A-Z]))"
    r"(?i:password|passwd|passphrase|secret|token|credentials?|api[._-]?key|private[._-]?key"
    r"|key[._-]?pem|jaas[._-]?config|oauthbearer[._-]?config)$"
)
"""What the name of a pass-through entry ends with when its value is a secret: the last
word(s), split at ``.``, ``_``, ``-`` or a camelCase hump. This covers aiokafka's
``sasl_plain_password``, and librdkafka's ``sasl.password``, ``ssl.key.password``,
``ssl.keystore.password``, ``ssl.key.pem``, ``sasl.oauthbearer.config`` (librdkafka flags it
sensitive, and echoes it in errors), ``sasl.oauthbearer.client.secret`` and its
``...client.credentials.client.secret`` alias, and
``sasl.oauthbearer.assertion.private.key.passphrase``/``.pem``; Java's ``sasl.jaas.config``
(refused by librdkafka, but it holds a password); and ``token``, ``api_key``,
``credentials`` and the like in any other map. Not names ending in ``.location``, ``.url``,
``.id`` or ``.username``: paths, addresses and names are shown."""


def names_a_secret(name: str) -> bool:
    """Whether a pass-through entry called ``name`` holds a secret (:data:`SECRET_NAME`)."""
    return SECRET_NAME.search(name) is not None


def revealed(values: Mapping[str, object]) -> dict[str, object]:
    """A pass-through map with each secret's text, for the code that hands it to a broker
    library."""
    return {
        name: value.get_secret_value() if isinstance(value, SecretStr) else value
        for name, value in values.items()
    }


def secrets_of(model: BaseModel) -> list[str]:
    """The text of every secret set in ``model`` (a section), its secret keys' and its
    pass-through maps' alike: what must not show in anything derived from it, such as a
    client's settings in a report or a broker library's error."""
    found: list[str] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        values = value.values() if isinstance(value, Mapping) else [value]
        found += [v.get_secret_value() for v in values if isinstance(v, SecretStr)]
    return found


def hidden(text: str, secrets: list[str]) -> str:
    """``text`` (a broker library's message, which may echo what it was given) with every
    occurrence of one of ``secrets`` replaced by the mask."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


@dataclass(frozen=True)
class Special:
    """A value accepted although outside the key's range, with what it means.

    Use as ``Annotated[float, Special(-1, "keep forever")]`` with ``Field(ge=0)``: the
    value skips the range check (and becomes the field's type: -1 -> -1.0 for a float).
    """

    value: int
    meaning: str

    def __get_pydantic_core_schema__(
        self, source: Callable[[Any], Any], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        def accept(value: Any, validate: core_schema.ValidatorFunctionWrapHandler) -> Any:
            if type(value) in (int, float) and value == self.value:  # never a bool
                return source(value)
            return validate(value)

        return core_schema.no_info_wrap_validator_function(accept, handler(source))


@dataclass(frozen=True)
class ConfigKey:
    """One key of one section: ``section.name``."""

    section: str
    name: str
    kind: type  # int, float, bool, str or dict
    secret: bool  # a str never shown (typed SecretStr): masked in dumps and error texts
    optional: bool
    choices: tuple[str, ...]  # non-empty when only these strings are accepted
    default: Any
    doc: str
    ge: float | None
    gt: float | None
    special: tuple[Special, ...]

    @property
    def may_hold_secret(self) -> bool:
        """A secret, or a mapping (whose entries may be, by name): a value that does not
        parse or fit is never shown."""
        return self.secret or self.kind is dict

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def env_var(self) -> str:
        return f"{ENV_PREFIX}{self.section}_{self.name}".upper()

    def type_text(self) -> str:
        """The type and constraints, for documentation and error messages."""
        if self.choices:
            text = "one of " + ", ".join(self.choices)
        elif self.kind is dict:
            text = "mapping"
        elif self.secret:
            text = "secret str"
        else:
            text = self.kind.__name__
            bounds = []
            if self.ge is not None:
                bounds.append(f">= {_number(self.ge)}")
            if self.gt is not None:
                bounds.append(f"> {_number(self.gt)}")
            if bounds:
                text += " " + " and ".join(bounds)
            for special in self.special:
                text += f" or {_number(special.value)} ({special.meaning})"
        if self.optional:
            text += " or null"
        return text


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def describe_field(
    section: str, name: str, info: FieldInfo, choices: tuple[str, ...], doc: str
) -> ConfigKey:
    """The :class:`ConfigKey` of a section model's field (``choices``/``doc`` as the section
    states them: they may be computed, e.g. the registered backends)."""
    annotation = info.annotation
    optional = False
    if typing.get_origin(annotation) in (typing.Union, UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"{section}.{name}: unsupported type {annotation!r}")
        optional, annotation = True, members[0]
    kind: type
    secret = annotation is SecretStr
    if typing.get_origin(annotation) is Literal:
        kind, choices = str, choices or typing.get_args(annotation)
    elif typing.get_origin(annotation) is dict:
        kind = dict
    elif annotation in (int, float, bool, str):
        kind = cast(type, annotation)
    elif secret:
        kind = str
    else:
        raise TypeError(f"{section}.{name}: unsupported type {annotation!r}")
    ge = next((m.ge for m in info.metadata if isinstance(m, annotated_types.Ge)), None)
    gt = next((m.gt for m in info.metadata if isinstance(m, annotated_types.Gt)), None)
    return ConfigKey(
        section=section,
        name=name,
        kind=kind,
        secret=secret,
        optional=optional,
        choices=choices,
        default=info.get_default(call_default_factory=True),
        doc=doc,
        ge=None if ge is None else float(ge),  # type: ignore[arg-type]
        gt=None if gt is None else float(gt),  # type: ignore[arg-type]
        special=tuple(m for m in info.metadata if isinstance(m, Special)),
    )
