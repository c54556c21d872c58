"""How checkpointed values become JSON and back (``serdes=``), pydantic models included."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic_core import PydanticSerializationError, to_jsonable_python

from relayflow.json_values import non_json_reason


@runtime_checkable
class Serdes(Protocol):
    """A pair of functions that turn a value into a JSON value and back."""

    def dumps(self, value: Any) -> Any:
        """The JSON value (dict, list, str, number, bool or None) that stands for ``value``."""
        ...

    def loads(self, data: Any) -> Any:
        """The value that ``data`` (produced by :meth:`dumps`) stands for."""
        ...


class JsonSerdes:
    """The default: JSON values as they are; pydantic models and dataclasses dumped to JSON."""

    def dumps(self, value: Any) -> Any:
        """Dump ``value`` to a JSON value (``model_dump(mode="json")`` for pydantic models)."""
        try:
            dumped = to_jsonable_python(value)
        except PydanticSerializationError as exc:
            raise TypeError(f"value is not JSON-serialisable: {value!r}") from exc
        # NaN and Infinity pass through pydantic and would be stored as null: refuse them.
        reason = non_json_reason(dumped)
        if reason is not None:
            raise TypeError(f"value is not JSON: {reason}")
        return dumped

    def loads(self, data: Any) -> Any:
        """JSON values load as themselves."""
        return data


DEFAULT_SERDES = JsonSerdes()


def dump_value(value: Any, serdes: Serdes | None) -> Any:
    """``value`` as a JSON value, through ``serdes`` when given."""
    if serdes is None:
        return DEFAULT_SERDES.dumps(value)
    return DEFAULT_SERDES.dumps(serdes.dumps(value))


def dump_output(what: str, value: Any, serdes: Serdes | None) -> Any:
    """Like :func:`dump_value`, with ``what`` (``step 'charge'``) named in the error."""
    try:
        return dump_value(value, serdes)
    except TypeError as exc:
        detail = str(exc).removeprefix("value is not JSON: ")
        raise TypeError(f"{what} returned a value that is not JSON: {detail}") from exc


def load_value(data: Any, serdes: Serdes | None) -> Any:
    """The value a checkpointed JSON value stands for."""
    return data if serdes is None else serdes.loads(data)
