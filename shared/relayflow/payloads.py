"""Large JSON values by reference: offload over the inline cap, resolve pointers back.

A value whose compact JSON exceeds the cap (default 32 KiB) is stored in a
:class:`~relayflow.ports.PayloadStore` and replaced by ``{"$relayflowPayload": ref, "size": n}``.
The orchestrator and the step host both use these helpers on step requests and answers.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

from relayflow.errors import PayloadIntegrityError as PayloadIntegrityError
from relayflow.errors import PayloadNotFoundError as PayloadNotFoundError
from relayflow.errors import ValidationError
from relayflow.ports import PayloadStore

POINTER_KEY = "$relayflowPayload"
DEFAULT_INLINE_CAP = 32 * 1024
#: Every payload reference is ``sha256:<hex digest of the bytes>``, whatever the store.
REF_PREFIX = "sha256:"
_REF = re.compile(r"^sha256:([0-9a-f]{64})$")


#: The payload store cannot give a value: gone, or not the bytes its reference names.
UNREADABLE_PAYLOADS = (PayloadNotFoundError, PayloadIntegrityError)


def payload_ref(data: bytes) -> str:
    """The reference of ``data`` in any payload store: ``sha256:<hex>``."""
    return REF_PREFIX + hashlib.sha256(data).hexdigest()


def ref_digest(ref: str) -> str:
    """The hex digest ``ref`` names.

    Raises:
        ValidationError: ``ref`` is not a payload reference.
    """
    match = _REF.match(ref) if isinstance(ref, str) else None
    if match is None:
        raise ValidationError(f"not a payload reference: {ref!r}")
    return match.group(1)


def encode_value(value: Any) -> bytes:
    """The compact UTF-8 JSON of ``value`` (what the cap measures and the store keeps)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


def is_pointer(value: Any) -> bool:
    """True when ``value`` is a payload pointer (exactly the two pointer keys)."""
    return (
        isinstance(value, dict)
        and len(value) == 2
        and isinstance(value.get(POINTER_KEY), str)
        and isinstance(value.get("size"), int)
    )


def make_pointer(ref: str, size: int) -> dict[str, Any]:
    """The pointer left in place of a stored value."""
    return {POINTER_KEY: ref, "size": size}


class PayloadCodec:
    """Offloads and resolves values against one store, remembering what it has seen.

    Values resolved through a codec are not uploaded again when the same codec offloads them
    (a host answering a request re-sends every journalled output it was given).

    Args:
        store: Where offloaded values live.
        cap: Values whose JSON is larger than this many bytes are offloaded.
    """

    def __init__(self, store: PayloadStore, cap: int | None = None) -> None:
        self.store = store
        self.cap = DEFAULT_INLINE_CAP if cap is None else cap
        self._refs: dict[str, str] = {}

    def offload(self, value: Any) -> Any:
        """``value`` itself when small enough (or already a pointer), else a pointer to it."""
        if value is None or isinstance(value, bool | int | float) or is_pointer(value):
            return value
        data = encode_value(value)
        if len(data) <= self.cap:
            return value
        digest = hashlib.sha256(data).hexdigest()
        ref = self._refs.get(digest)
        if ref is None:
            ref = self.store.put(data)
            self._refs[digest] = ref
        return make_pointer(ref, len(data))

    def resolve(self, value: Any) -> Any:
        """The stored value when ``value`` is a pointer, else ``value`` unchanged."""
        if not is_pointer(value):
            return value
        ref = value[POINTER_KEY]
        data = self.store.get(ref)
        self._refs[hashlib.sha256(data).hexdigest()] = ref
        return json.loads(data)

    def offload_journal(self, journal: dict[str, Any]) -> dict[str, Any]:
        """A copy of a wire journal with large step outputs and wait payloads offloaded."""
        return _map_journal(journal, self.offload)

    def resolve_journal(self, journal: dict[str, Any]) -> dict[str, Any]:
        """A copy of a wire journal with every step output and wait payload resolved."""
        return _map_journal(journal, self.resolve)

    def offload_step_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """A copy of a wire step request with its input and journal values offloaded."""
        return self._map_message(request, self.offload, ("input",))

    def resolve_step_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """A copy of a wire step request with its input and journal values resolved."""
        return self._map_message(request, self.resolve, ("input",))

    def offload_step_response(self, response: dict[str, Any]) -> dict[str, Any]:
        """A copy of a wire step response with output, journal and child inputs offloaded."""
        return self._map_message(response, self.offload, ("output",))

    def resolve_step_response(self, response: dict[str, Any]) -> dict[str, Any]:
        """A copy of a wire step response with output, journal and child inputs resolved."""
        return self._map_message(response, self.resolve, ("output",))

    def _map_message(
        self, message: dict[str, Any], fn: Any, fields: tuple[str, ...]
    ) -> dict[str, Any]:
        mapped = dict(message)
        for name in fields:
            if name in mapped:
                mapped[name] = fn(mapped[name])
        if isinstance(mapped.get("journal"), dict):
            mapped["journal"] = _map_journal(mapped["journal"], fn)
        waitpoints = mapped.get("waitpoints")
        if isinstance(waitpoints, list):
            mapped["waitpoints"] = [_map_child_input(wp, fn) for wp in waitpoints]
        return mapped


def _map_journal(journal: dict[str, Any], fn: Any) -> dict[str, Any]:
    mapped = dict(journal)
    steps = journal.get("stepResults")
    if isinstance(steps, dict):
        mapped["stepResults"] = {
            key: _map_field(entry, "output", fn) for key, entry in steps.items()
        }
    resolved = journal.get("waitpointsResolved")
    if isinstance(resolved, dict):
        mapped["waitpointsResolved"] = {
            key: _map_field(entry, "payload", fn) for key, entry in resolved.items()
        }
    return mapped


def _map_field(entry: Any, name: str, fn: Any) -> Any:
    if not isinstance(entry, dict) or name not in entry:
        return entry
    value = entry[name]
    mapped = fn(value)
    if mapped is value:
        return entry
    copied = dict(entry)
    copied[name] = mapped
    return copied


def _map_child_input(waitpoint: Any, fn: Any) -> Any:
    if not isinstance(waitpoint, dict) or not isinstance(waitpoint.get("meta"), dict):
        return waitpoint
    meta = waitpoint["meta"]
    if "childInput" not in meta:
        return waitpoint
    copied = copy.copy(waitpoint)
    copied["meta"] = _map_field(meta, "childInput", fn)
    return copied


def offload(value: Any, store: PayloadStore, *, cap: int | None = None) -> Any:
    """``value``, or a pointer to it in ``store`` when its JSON is larger than ``cap``."""
    return PayloadCodec(store, cap).offload(value)


def resolve(value: Any, store: PayloadStore) -> Any:
    """The value a pointer names (``value`` unchanged when it is not a pointer)."""
    return PayloadCodec(store).resolve(value)


def resolve_step_request(request: dict[str, Any], store: PayloadStore) -> dict[str, Any]:
    """A copy of a wire step request with every pointer in input and journal resolved."""
    return PayloadCodec(store).resolve_step_request(request)


def offload_step_response(
    response: dict[str, Any], store: PayloadStore, *, cap: int | None = None
) -> dict[str, Any]:
    """A copy of a wire step response with its large values offloaded."""
    return PayloadCodec(store, cap).offload_step_response(response)
