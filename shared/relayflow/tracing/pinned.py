"""The ids the next span started in this context must take (read by the SDK's id generator
that :mod:`relayflow.tracing.sdk` installs)."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from relayflow.tracing.ids import SpanRef

_PINNED: contextvars.ContextVar[SpanRef | None] = contextvars.ContextVar(
    "relayflow_pinned_span", default=None
)


def pinned() -> SpanRef | None:
    """The ids pinned for the span being started here, if any."""
    return _PINNED.get()


@contextmanager
def pinning(ref: SpanRef) -> Iterator[None]:
    """Inside the block, a span started here takes ``ref``'s span id (and trace id, when it
    starts a trace)."""
    token = _PINNED.set(ref)
    try:
        yield
    finally:
        _PINNED.reset(token)
