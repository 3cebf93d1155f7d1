"""The base of every configuration section: a frozen, strictly validated pydantic model.

A section (``mq``, ``msgstream``, or a backend's own, declared in the backend's package)
subclasses :class:`Section`, names itself in ``SECTION`` and declares each key as a typed
attribute with its default, its constraints in the type (:data:`Count`, :data:`Seconds`,
``Annotated[int, Field(ge=0)]``) and its description in the docstring below it.
Validation is strict, as YAML is typed: ``"8"`` is no integer and ``1`` no boolean; an
int is accepted for a float and becomes one. Environment variables are text, converted by
type before they reach a section (:mod:`msgstream.configuration.config`). Any validation problem is
a :class:`~msgstream.errors.ConfigError` naming the full key
(:mod:`msgstream.configuration.config_errors`).

Why pydantic rather than msgspec: both validate typed models fast enough for a config
read once; pydantic's error details (type, location, input, constraint) let one table word
every problem as before, its field metadata (description, ``ge``/``gt``) carries the
generated reference, and model validators hold the rules spanning several keys.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    PlainValidator,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from ..errors import ConfigError
from .config_errors import MASK_GIVEN, config_error
from .config_keys import MASK, ConfigKey, describe_field, names_a_secret

__all__ = ["Address", "Count", "FrozenModel", "PassThrough", "Section", "Seconds"]


class FrozenModel(BaseModel):
    """A pydantic model whose instances cannot change: assigning raises the
    ``dataclasses.FrozenInstanceError`` (an ``AttributeError``) configurations always raised."""

    model_config = ConfigDict(frozen=True)

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _scalar(value: object) -> object:
    if value is None or isinstance(value, str | int | float | bool | SecretStr):
        return value
    raise PydanticCustomError("scalar_expected", "expected a string, number or boolean")


def _secrets_by_name(values: dict[str, object]) -> dict[str, object]:
    """Each entry whose name says it is a secret
    (:func:`~msgstream.configuration.config_keys.names_a_secret`) as a ``SecretStr``: text, never
    shown, and never the mask a shown configuration has."""
    found = dict(values)
    for name, value in values.items():
        if value is None or isinstance(value, SecretStr) or not names_a_secret(name):
            continue
        if not isinstance(value, str):
            raise PydanticCustomError(
                "secret_entry_type",
                "a secret must be text",
                {"name": name, "kind": type(value).__name__},
            )
        if value == MASK:
            raise PydanticCustomError("secret_entry_mask", "the mask", {"name": name})
        found[name] = SecretStr(value)
    return found


PassThrough = Annotated[
    dict[str, Annotated[str | int | float | bool | SecretStr | None, PlainValidator(_scalar)]],
    AfterValidator(_secrets_by_name),
]
"""A map handed to a broker client as is: non-empty string keys, scalar values. An entry
whose name says it is a secret (``sasl.password``, ``ssl.key.pem``...) holds a
``SecretStr``; the code building a client reads the map through
:func:`~msgstream.configuration.config_keys.revealed`."""


@dataclasses.dataclass(frozen=True)
class Address:
    """Marks a key holding a broker address or URL, which is refused when it carries
    credentials (anything before an ``@``): the address is shown in error texts and logs,
    and no broker library msgstream uses reads credentials from it. ``credentials`` names
    the keys that take them. Use as ``Annotated[str | None, Address("kafka.sasl_...")]``."""

    credentials: str

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        def refuse_credentials(value: Any) -> Any:
            if isinstance(value, str) and "@" in value:
                raise PydanticCustomError(
                    "address_credentials", "credentials in an address", {"use": self.credentials}
                )
            return value

        return core_schema.no_info_after_validator_function(refuse_credentials, handler(source))


Seconds = Annotated[float, Field(gt=0)]
"""A key's type for a timeout or an interval: seconds, above zero (zero would never wait)."""

Count = Annotated[int, Field(ge=1)]
"""A key's type for a number of messages or bytes (a buffer, a limit, a batch) or a port:
one or more."""


class Section(FrozenModel):
    """One section of the configuration; constructing it validates every key."""

    model_config = ConfigDict(
        frozen=True,
        strict=True,
        extra="forbid",
        str_min_length=1,
        allow_inf_nan=False,
        use_attribute_docstrings=True,
    )

    SECTION: ClassVar[str] = ""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
            return
        except ValidationError as exc:
            error = config_error(exc, type(self).SECTION, type(self).keys())
        # Raised here, outside the handler, so the error has no context: pydantic's
        # ValidationError holds the input value, a secret one too.
        raise error

    @classmethod
    def keys(cls) -> dict[str, ConfigKey]:
        """Each key of the section by name, in declaration order."""
        return {
            name: describe_field(cls.SECTION, name, info, cls.key_choices(name), cls.key_doc(name))
            for name, info in cls.model_fields.items()
        }

    @classmethod
    def key_choices(cls, name: str) -> tuple[str, ...]:
        """The strings a key accepts when they are computed rather than a ``Literal``."""
        return ()

    @classmethod
    def key_doc(cls, name: str) -> str:
        """A key's one-line description: its field's ``description``, which pydantic takes
        from the attribute's docstring (``use_attribute_docstrings``), on one line."""
        return " ".join((cls.model_fields[name].description or "").split())

    @model_validator(mode="before")
    @classmethod
    def _yaml_shorthands(cls, data: Any) -> Any:
        """What a YAML file says loosely: an empty optional string or a mapping with every
        entry commented out (null) means unset/empty, and ``acks: 1`` means the choice "1".
        A secret given as the mask is refused: it was copied from a shown configuration."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name, key in cls.keys().items():
            value = data.get(name)
            if key.secret and value == MASK:
                raise ConfigError(key.dotted, MASK_GIVEN)
            if value == "" and key.optional and key.kind is str:
                data[name] = None
            elif value is None and name in data and key.kind is dict:
                data[name] = {}
            elif type(value) is int and str(value) in key.choices:
                data[name] = str(value)
        return data

    def replace(self, **changes: Any) -> Self:
        """A validated copy with some keys changed."""
        return type(self)(**{**self.model_dump(), **changes})
