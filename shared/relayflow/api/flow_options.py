"""The flow-control options of ``POST /api/runs`` as the wire writes them: durations in the
reference's forms and the ``debounce`` body."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema, model_validator

from relayflow.api.model_bases import RequestModel, integral
from relayflow.flow.errors import FlowControlError
from relayflow.flow.keys import check_key
from relayflow.sdk.durations import DURATION_PATTERN, POSITIVE_DURATION_PATTERN, parse_duration


def _wire_duration(minimum: int) -> Any:
    """A validator of a duration field: whole milliseconds (at least ``minimum``) or a
    ``<n>ms|s|m|h|d|w`` string of at least that many milliseconds."""

    def check(value: Any) -> Any:
        value = integral(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            return value
        if (
            isinstance(value, str)
            and re.fullmatch(DURATION_PATTERN, value)
            and parse_duration(value) >= minimum
        ):
            return value
        raise ValueError(
            f"must be at least {minimum} ms: whole milliseconds or a duration such as '10m'"
        )

    return check


def _duration_schema(minimum: int) -> dict[str, Any]:
    text = DURATION_PATTERN if minimum == 0 else POSITIVE_DURATION_PATTERN
    return {
        "anyOf": [
            {"type": "integer", "minimum": minimum},
            {"type": "string", "pattern": text},
        ]
    }


#: A duration as the reference writes it: whole milliseconds or ``<n>ms|s|m|h|d|w``.
WireDuration = Annotated[
    int | str, BeforeValidator(_wire_duration(0)), WithJsonSchema(_duration_schema(0))
]
#: A duration longer than zero.
PositiveWireDuration = Annotated[
    int | str, BeforeValidator(_wire_duration(1)), WithJsonSchema(_duration_schema(1))
]


class DebounceBody(RequestModel):
    """``debounce``: fold a burst of triggers with the same key into one run."""

    key: str = Field(
        min_length=1,
        max_length=512,
        description="a path into the input (customerId, input.customer.id) or the event "
        "(event.data.customerId), in the path grammar of input mappers",
    )
    delay: PositiveWireDuration = Field(description="the quiet time that ends a burst")
    mode: Literal["leading", "trailing"] = "trailing"
    max_wait: PositiveWireDuration | None = Field(
        default=None,
        description="the run starts at most this long after the first trigger (not shorter "
        "than delay)",
    )

    @model_validator(mode="after")
    def _usable(self) -> DebounceBody:
        try:
            check_key(self.key, "key", required=True)
        except FlowControlError:
            raise ValueError("key must be a path into the input or the event") from None
        if self.max_wait is not None and parse_duration(self.max_wait) < parse_duration(self.delay):
            raise ValueError("maxWait must not be shorter than delay")
        return self
