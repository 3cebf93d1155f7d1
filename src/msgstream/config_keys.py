"""What one configuration key is, as derived from a field of a pydantic section model.

The description (dotted name, environment variable, type and range, default, one-line
doc) drives the environment mapping, the error texts and the generated configuration
reference, so a section declares each key once: as a typed attribute with its default,
its constraints (``ge``/``gt``) and a docstring, plus :class:`Special` for values
accepted outside the range (e.g. -1 meaning "keep forever").

A key typed ``SecretStr`` (pydantic's) is a *secret*: that type alone makes it masked
wherever a configuration is shown (pydantic's ``repr``, ``str`` and JSON dumps,
:meth:`~msgstream.config.Config.to_dict`, error texts) and read from its environment
variable as text; code that builds a client reveals it with :func:`reveal`.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
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
    "reveal",
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


def secrets_of(model: BaseModel) -> list[str]:
    """The text of every secret key set in ``model`` (a section): what must not show in
    anything derived from it, such as a client's settings in a report."""
    return [
        value.get_secret_value()
        for name in type(model).model_fields
        if isinstance(value := getattr(model, name), SecretStr)
    ]


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
