"""Code versions: which code a run's body runs on, and what happens when it is not there.

A run records the code that answered it (``RunRecord.code_version``). A ``pinned`` workflow's
run keeps the first one: every later request names it, the dispatcher reaches it (a Lambda
qualifier) and a host on another build answers ``version_unavailable``, on which the run
waits and tries again on its alarm. An ``upgrade`` workflow's run names no version and
records the latest code that answered. See docs/guides/versioning.md.
"""

from __future__ import annotations

from relayflow.core.effects import Transition
from relayflow.core.outcome import arm, working_copy
from relayflow.core.record import RunRecord, VersionWait
from relayflow.core.settings import CoreSettings
from relayflow.core.waits import compute_wake_at
from relayflow.protocol import CodeVersion, StepResponse


def pin_of(record: RunRecord) -> CodeVersion | None:
    """The code version a request for ``record`` must reach (None: any code may answer)."""
    if record.versioning == "upgrade":
        return None
    return record.code_version


def build_of(record: RunRecord) -> str | None:
    """The build the run is on (None: no code has answered it since it started or moved)."""
    return record.code_version.build if record.code_version is not None else None


def pinned_function(record: RunRecord) -> str | None:
    """The qualified Lambda function (``name:7``) ``record`` keeps invoking, which must not be
    deleted while the run lives (None: no pin, or ``name:$LATEST``, which pins nothing)."""
    pin = pin_of(record)
    if pin is None or pin.function is None or pin.function.endswith(":$LATEST"):
        return None
    return pin.function


def record_code_version(rec: RunRecord, response: StepResponse) -> None:
    """Note on the working copy ``rec`` the code that answered, and that it is reachable."""
    rec.version_wait = None
    if response.versioning is not None:
        rec.versioning = response.versioning
    if response.code_version is None:
        return
    if rec.code_version is None or rec.versioning == "upgrade":
        rec.code_version = response.code_version


def wait_for_version(
    record: RunRecord, reason: str, now: int, settings: CoreSettings
) -> Transition:
    """The run's pinned code version answered ``version_unavailable``: try again on an alarm,
    each time later, without failing the run (an operator may move it, see :func:`unpin`)."""
    rec = working_copy(record)
    attempts = 1 if rec.version_wait is None else rec.version_wait.attempts + 1
    since = now if rec.version_wait is None else rec.version_wait.since
    rec.version_wait = VersionWait(since=since, reason=reason, attempts=attempts)
    rec.dispatch_retry.last_error = reason
    rec.dispatch_retry.next_attempt_at = now + settings.version_retry_ms(attempts)
    rec.wake_at = compute_wake_at(rec, now)
    assert rec.wake_at is not None
    return Transition(rec, (arm(rec, rec.wake_at),))


def unpin(rec: RunRecord, now: int) -> None:
    """Move the working copy ``rec`` to the current code: its next invocation goes to whatever
    code answers now, which it then records; a wait for its old version ends at once."""
    rec.code_version = None
    if rec.version_wait is not None:
        rec.version_wait = None
        rec.dispatch_retry.last_error = None
        if rec.dispatch_retry.next_attempt_at is not None:
            rec.dispatch_retry.next_attempt_at = now
            rec.wake_at = compute_wake_at(rec, now)


#: The qualifier Lambda reports for a function's unpublished code.
_UNPUBLISHED = ":$LATEST"


def version_warning(record: RunRecord) -> str | None:
    """Why the code ``record`` is pinned to cannot be reached again by its function, if so:
    it ran on ``$LATEST``, which changes with every deploy (None otherwise)."""
    pin = pin_of(record)
    if pin is None or not pin.function or not pin.function.endswith(_UNPUBLISHED):
        return None
    return (
        f"pinned to {pin.function}, which is not a published version: the next deploy "
        f"replaces it, and the run then waits for build {pin.build}; invoke the function "
        "through an alias of published versions"
    )
