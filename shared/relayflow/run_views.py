"""Reading a run to show it, when its payload store no longer holds some of its values.

A run's large values live in the payload store (by reference from the run's record, or as
payload pointers in its values). A view of the run (the API's detail, timeline and listing)
never fails because one of them is gone: it leaves the value out and says which one and why
(:class:`~relayflow.core.views.UnavailableValue`). Driving the run still needs every value.
"""

from __future__ import annotations

from typing import Any

from relayflow.core.record import RunRecord
from relayflow.core.views import RunDetail, UnavailableValue
from relayflow.payloads import POINTER_KEY, UNREADABLE_PAYLOADS, is_pointer, resolve
from relayflow.ports import LenientRunReader, PayloadStore, RunStore


def read_for_view(runs: RunStore, run_id: str) -> tuple[RunRecord | None, list[UnavailableValue]]:
    """The run (None when there is none) and the values of it that could not be read.

    Only a store that can read around a lost value (:class:`LenientRunReader`) pays for the
    second read, and only when the first one met a lost value.
    """
    try:
        return runs.get(run_id), []
    except UNREADABLE_PAYLOADS:
        if not isinstance(runs, LenientRunReader):
            raise
    found = runs.get_lenient(run_id)
    return (None, []) if found is None else found


def resolve_detail(
    view: RunDetail, payloads: PayloadStore | None, unavailable: list[UnavailableValue]
) -> RunDetail:
    """``view`` with its input and output pointers resolved from ``payloads``; a value that
    cannot be read is left out (None) and listed, with ``unavailable``, in
    ``values_unavailable``."""
    missing = list(unavailable)
    update: dict[str, Any] = {}
    if payloads is not None:
        for name in ("input", "output"):
            value = getattr(view, name)
            if is_pointer(value):
                update[name] = _resolved(value, payloads, f"/{name}", missing)
    if missing:
        update["values_unavailable"] = missing
    return view.model_copy(update=update) if update else view


def _resolved(
    pointer: dict[str, Any], payloads: PayloadStore, path: str, missing: list[UnavailableValue]
) -> Any:
    try:
        return resolve(pointer, payloads)
    except UNREADABLE_PAYLOADS as exc:
        missing.append(UnavailableValue(path=path, reason=exc.code, ref=pointer[POINTER_KEY]))
        return None
