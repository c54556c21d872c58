"""How checkpointed values become JSON and back (``serdes=``), pydantic models included."""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from relayflow.errors import NotJsonError
from relayflow.json_values import find_non_json


@runtime_checkable
class Serdes(Protocol):
    """A pair of functions that turn a value into a JSON value and back."""

    def dumps(self, value: Any) -> Any:
        """The JSON value (dict, list, str, number, bool or None) that stands for ``value``."""
        ...

    def loads(self, data: Any) -> Any:
        """The value that ``data`` (produced by :meth:`dumps`) stands for."""
        ...


class _DumpedByPydantic:
    """Tells the objects whose JSON form is documented (pydantic models, dataclasses), and
    whether the value held any (their dump is checked again: a field may be ``NaN``)."""

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, item: Any) -> bool:
        if isinstance(item, BaseModel) or (
            dataclasses.is_dataclass(item) and not isinstance(item, type)
        ):
            self.seen = True
            return True
        return False


class JsonSerdes:
    """The default: JSON values as they are (tuples as arrays); pydantic models and
    dataclasses dumped to JSON; anything else refused with :class:`NotJsonError`."""

    def dumps(self, value: Any) -> Any:
        """Dump ``value`` to a JSON value (``model_dump(mode="json")`` for pydantic models).

        Raises:
            NotJsonError: ``value`` holds something JSON cannot hold as it is; the message
                and ``data["path"]`` say where.
        """
        dumped_by = _DumpedByPydantic()
        found = find_non_json(value, dumped_by=dumped_by)
        if found is None:
            try:
                dumped = to_jsonable_python(value)
            except PydanticSerializationError as exc:
                raise NotJsonError(f"value is not JSON: {exc}") from exc
            if not dumped_by.seen:
                return dumped
            found = find_non_json(dumped)
            if found is None:
                return dumped
        raise NotJsonError(f"value is not JSON: {found}", data={"path": found.path})

    def loads(self, data: Any) -> Any:
        """JSON values load as themselves."""
        return data


DEFAULT_SERDES = JsonSerdes()


def dump_value(value: Any, serdes: Serdes | None) -> Any:
    """``value`` as a JSON value, through ``serdes`` when given (its dump is checked too)."""
    if serdes is None:
        return DEFAULT_SERDES.dumps(value)
    return DEFAULT_SERDES.dumps(serdes.dumps(value))


def dump_output(what: str, value: Any, serdes: Serdes | None) -> Any:
    """Like :func:`dump_value`, with ``what`` (``step 'charge' returned a value``) named in
    the error."""
    try:
        return dump_value(value, serdes)
    except NotJsonError as exc:
        detail = exc.message.removeprefix("value is not JSON: ")
        hint = "" if serdes is not None else "; convert it, or pass serdes= to store it"
        raise NotJsonError(f"{what} that is not JSON: {detail}{hint}", data=exc.data) from exc


def dump_converting(value: Any) -> Any:
    """``value`` as pydantic converts it (sets to lists, datetimes to text...), for values
    that only describe something, like an error's ``data``; ``TypeError`` if it cannot."""
    try:
        dumped = to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise TypeError(f"value is not JSON-serialisable: {value!r}") from exc
    found = find_non_json(dumped)
    if found is not None:
        raise TypeError(f"value is not JSON: {found}")
    return dumped


def load_value(data: Any, serdes: Serdes | None) -> Any:
    """The value a checkpointed JSON value stands for."""
    return data if serdes is None else serdes.loads(data)
