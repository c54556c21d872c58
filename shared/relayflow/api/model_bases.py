"""Bases of the HTTP API's bodies: strict camelCase requests, camelCase responses, and the
number rule JSON Schema's ``integer`` implies."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
)
from pydantic.alias_generators import to_camel


def integral(value: Any) -> Any:
    """A JSON number with no fraction as an int: JSON has one number type, and JSON Schema's
    ``integer`` accepts ``1.0`` as the integer 1 (``1.5`` stays a float and is refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: An integer field of a request body: strict (no strings, no booleans) but ``5.0`` is 5.
JsonInt = Annotated[int, BeforeValidator(integral)]


def no_default(schema: dict[str, Any]) -> None:
    """Leave ``default`` out of a field's schema: leaving the field out is not sending null."""
    schema.pop("default", None)


class RequestModel(BaseModel):
    """Base of request bodies: camelCase only, strict types, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        extra="forbid",
        strict=True,
    )


class ResponseModel(BaseModel):
    """Base of response bodies: built by field name in Python, written camelCase."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict with camelCase keys."""
        return self.model_dump(mode="json", by_alias=True)


class CompactModel(ResponseModel):
    """A response whose unset (None) fields are left out, as the reference's bodies are."""

    @model_serializer(mode="wrap")
    def _drop_none(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data
