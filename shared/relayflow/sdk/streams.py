"""``ctx.stream``: chunks sent with the response; a finished stream is never read again."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Literal

from relayflow.protocol import StreamChunk, StreamCompletion, StreamEncoding
from relayflow.sdk.failures import rehydrate_error, serialize_error
from relayflow.sdk.instructions import Call, Op
from relayflow.sdk.scope import ContextCore, StepScope, ensure_not_in_step
from relayflow.sdk.serdes import dump_value

#: What an author passes: ``"bytes"`` (or its wire name ``"base64"``) for binary chunks.
Encoding = Literal["text", "json", "bytes", "base64"]
_WIRE_ENCODING: dict[str, StreamEncoding] = {
    "text": "text",
    "json": "json",
    "bytes": "base64",
    "base64": "base64",
}
_END = object()


def _encode(value: Any, encoding: StreamEncoding) -> Any:
    if encoding == "text":
        return value if isinstance(value, str) else str(value)
    if encoding == "base64":
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(f"expected bytes chunks, got {type(value).__name__}")
        return base64.b64encode(bytes(value)).decode("ascii")
    return dump_value(value, None)


def _next_sync(iterator: Iterator[Any]) -> Any:
    return next(iterator, _END)


async def _next_async(iterator: AsyncIterator[Any]) -> Any:
    try:
        return await iterator.__anext__()
    except StopAsyncIteration:
        return _END


def stream_op(
    core: ContextCore, stream_id: str, source: Any, encoding: Encoding, *, allow_async: bool
) -> Op[int]:
    """Emit every item of ``source`` as a chunk; returns the chunk count (final one included)."""
    ensure_not_in_step("ctx.stream")
    wire_encoding = _WIRE_ENCODING.get(encoding)
    if wire_encoding is None:
        raise ValueError(f"invalid stream encoding: {encoding!r}")
    inv = core.inv
    sid = core.key(stream_id)
    if sid in inv.streams_seen:
        raise ValueError(f"ctx.stream: duplicate streamId {sid!r} within the same run")
    inv.streams_seen.add(sid)
    inv.last_op = f"stream:{sid}"
    done = inv.journal.streams_completed.get(sid)
    if done is not None:
        if done.error is not None:
            raise rehydrate_error(done.error)
        return done.chunk_count
    inv.begin_work()
    produced = source() if callable(source) and not hasattr(source, "__iter__") else source
    next_fn: Callable[..., Any]
    if hasattr(produced, "__aiter__"):
        if not allow_async:
            raise TypeError("a synchronous workflow body cannot stream an async iterable")
        next_fn, handle = _next_async, produced.__aiter__()
    else:
        next_fn, handle = _next_sync, iter(produced)
    scope = StepScope(id_prefix=f"m:stream:{sid}:")
    seq = 0
    try:
        while True:
            item = yield Call(next_fn, (handle,), None, scope, sid)
            if item is _END:
                break
            chunk = _encode(item, wire_encoding)
            seq += 1
            inv.emit_chunk(
                StreamChunk(
                    stream_id=sid, seq=seq, encoding=wire_encoding, chunk=chunk, at=inv.now_ms()
                )
            )
    except Exception as exc:
        _close(core, sid, seq, wire_encoding)
        error = serialize_error(exc)
        inv.journal.streams_completed[sid] = StreamCompletion(chunk_count=seq + 1, error=error)
        raise rehydrate_error(error) from exc
    _close(core, sid, seq, wire_encoding)
    inv.journal.streams_completed[sid] = StreamCompletion(chunk_count=seq + 1)
    return seq + 1


def _close(core: ContextCore, sid: str, seq: int, encoding: StreamEncoding) -> None:
    core.inv.emit_chunk(
        StreamChunk(
            stream_id=sid,
            seq=seq + 1,
            encoding=encoding,
            chunk=None,
            final=True,
            at=core.inv.now_ms(),
        )
    )
