"""Who is calling: the authenticated principal's name, kept for the request being answered
(operator actions record it as who asked)."""

from __future__ import annotations

from contextvars import ContextVar

#: Who asked when the API authenticates no one (``AllowAllAuth``, unsecured routes).
ANONYMOUS = "api"

_caller: ContextVar[str | None] = ContextVar("relayflow_request_caller", default=None)


def hold_caller(name: str | None) -> None:
    """Record ``name`` (None: nobody authenticated) as the current request's caller."""
    _caller.set(name)


def caller_name() -> str:
    """The current request's caller: the token's name, the IAM caller, or ``api``."""
    return _caller.get() or ANONYMOUS
