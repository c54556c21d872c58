"""How checkpointed values become JSON and back (``serdes=``), pydantic models included."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic_core import PydanticSerializationError, to_jsonable_python


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
            return to_jsonable_python(value)
        except PydanticSerializationError as exc:
            raise TypeError(f"value is not JSON-serialisable: {value!r}") from exc

    def loads(self, data: Any) -> Any:
        """JSON values load as themselves."""
        return data


DEFAULT_SERDES = JsonSerdes()


def dump_value(value: Any, serdes: Serdes | None) -> Any:
    """``value`` as a JSON value, through ``serdes`` when given."""
    if serdes is None:
        return DEFAULT_SERDES.dumps(value)
    return DEFAULT_SERDES.dumps(serdes.dumps(value))


def load_value(data: Any, serdes: Serdes | None) -> Any:
    """The value a checkpointed JSON value stands for."""
    return data if serdes is None else serdes.loads(data)
