"""Bounded tracebacks of failed attempts: the user's frames only, no locals, capped in size.

A failed attempt's error keeps the traceback Python would print, with the frames of the
standard library, of installed packages and of relayflow itself left out, so what remains is
the code the user wrote. It is capped (frames and bytes, cut in the middle and saying so) so
that a deep recursion or a huge message cannot push a journal entry or a stored item over its
size; a journal entry keeps the stacks of its latest attempts within a budget of its own.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path

from relayflow.protocol import MAX_STACK_BYTES, SerializedError, StepAttempt, cut_middle

#: The most frames one recorded traceback keeps (the whole chain of causes together).
MAX_FRAMES = 50
#: The traceback bytes one step's attempts keep together; older attempts' stacks go first.
ENTRY_STACK_BUDGET = 4 * MAX_STACK_BYTES
#: Frames kept before the cut when a traceback has more than ``MAX_FRAMES``: the outermost
#: frames say where the work began, the innermost where it failed.
_HEAD_FRAMES = 10
#: Longer pieces of the text (a huge message, say) keep their start: the frames stay in view.
_MAX_PIECE_CHARS = 1024
#: What replaces the stack of an older attempt dropped to keep the entry within its budget.
STACK_DROPPED = "(traceback dropped: a step keeps the tracebacks of its latest attempts only)"

_RELAYFLOW_DIR = str(Path(__file__).resolve().parents[1]) + os.sep
_LIBRARY_DIRS = tuple(
    sorted(
        {
            str(Path(path).resolve()) + os.sep
            for key in ("stdlib", "platstdlib", "purelib", "platlib")
            if (path := sysconfig.get_paths().get(key))
        }
    )
)
_PACKAGE_FOLDERS = frozenset({"site-packages", "dist-packages"})
#: Where :func:`recorded_traceback` keeps an error's formatted traceback.
_FORMATTED = "_relayflow_traceback"


def is_user_frame(filename: str) -> bool:
    """Whether a frame of ``filename`` is the user's: not relayflow's, not the standard
    library's, not an installed package's (nor a frozen module's)."""
    if filename.startswith("<frozen "):
        return False
    if filename.startswith("<"):
        return True  # code compiled from a string (exec, a notebook cell): the user's
    path = os.path.abspath(filename)
    if path.startswith(_RELAYFLOW_DIR) or path.startswith(_LIBRARY_DIRS):
        return False
    return _PACKAGE_FOLDERS.isdisjoint(Path(path).parts)


class _CutStack(traceback.StackSummary):
    """Frames with a run of them left out, said so where they were."""

    omitted_at = 0
    omitted = 0

    def format(self) -> list[str]:
        head = traceback.StackSummary.from_list(self[: self.omitted_at]).format()
        tail = traceback.StackSummary.from_list(self[self.omitted_at :]).format()
        return [*head, f"  ... {self.omitted} frames omitted ...\n", *tail]


def _keep(frames: Sequence[traceback.FrameSummary], budget: int) -> traceback.StackSummary:
    if len(frames) <= budget:
        return traceback.StackSummary.from_list(list(frames))
    head = min(_HEAD_FRAMES, budget // 2)
    tail = budget - head
    cut = _CutStack([*frames[:head], *(frames[-tail:] if tail else [])])
    cut.omitted_at = head
    cut.omitted = len(frames) - budget
    return cut


def _chain(head: traceback.TracebackException) -> Iterator[traceback.TracebackException]:
    """Every exception a traceback prints (causes, contexts, group members), once each."""
    seen: set[int] = set()
    pending = [head]
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        pending.extend(e for e in (item.__cause__, item.__context__) if e is not None)
        pending.extend(getattr(item, "exceptions", None) or ())


def recorded_traceback(error: BaseException) -> str | None:
    """:func:`format_user_traceback` of ``error``, formatted once: a failed attempt serialises
    its error for the attempt, the step's entry and the failure the body sees."""
    cached = error.__dict__.get(_FORMATTED)
    # Keyed by the traceback object: an exception raised again has a new one.
    if isinstance(cached, tuple) and cached[0] is error.__traceback__:
        return cached[1]  # type: ignore[no-any-return]
    stack = format_user_traceback(error)
    error.__dict__[_FORMATTED] = (error.__traceback__, stack)
    return stack


def format_user_traceback(error: BaseException) -> str | None:
    """The traceback of ``error`` and its chain with only the user's frames, at most
    ``MAX_FRAMES`` frames and ``MAX_STACK_BYTES`` bytes; ``None`` when no frame is the user's."""
    summary = traceback.TracebackException.from_exception(
        error, capture_locals=False, lookup_lines=False
    )
    budget = MAX_FRAMES
    found = False
    for item in _chain(summary):
        frames = [frame for frame in item.stack if is_user_frame(frame.filename)]
        found = found or bool(frames)
        item.stack = _keep(frames, budget)
        budget -= len(item.stack)
    if not found:
        return None
    return cut_middle("".join(_shortened(piece) for piece in summary.format()))


def _shortened(piece: str) -> str:
    if len(piece) <= _MAX_PIECE_CHARS:
        return piece
    omitted = len(piece) - _MAX_PIECE_CHARS
    return f"{piece[:_MAX_PIECE_CHARS]} ... ({omitted} characters omitted)\n"


def keep_recent_stacks(attempts: Sequence[StepAttempt], budget: int = ENTRY_STACK_BUDGET) -> None:
    """Drop the stacks of the oldest attempts until the attempts' stacks fit in ``budget``."""
    errors = [a.error for a in attempts if a.error is not None and a.error.stack]
    total = sum(_size(error) for error in errors)
    for error in errors[:-1]:
        if total <= budget:
            return
        total -= _size(error)
        error.stack = STACK_DROPPED
        total += _size(error)


def _size(error: SerializedError) -> int:
    return len((error.stack or "").encode("utf-8"))
