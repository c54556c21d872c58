"""Drives runs: load -> transition -> conditional save -> effects, retrying lost races.

One holder at a time per run has its lease (owner, expiry); whoever changes a leased run
leaves a dirty mark so the holder looks again before it lets go (a change made while the run
is held is never lost when the holder saves and lets go). Events and
signals are stored on their own first (``ports.PendingDeliveries``) and taken into the
record by the run's holder, or by the delivery itself when nobody holds the run; a delivery
that finds the run held marks it without changing its version, so concurrent deliveries
never fail each other and only the holder's next save fails.

The engine is one class built in layers, one module each: ``_base`` (wiring, time limits,
hand-offs), ``_effects`` (conditional changes and effects), ``_holding`` (leases, saves,
stored deliveries), ``_invocation`` (begin, dispatch, settle) and ``_engine`` (the entry
points and the drive loop).
"""

from relayflow.engine._engine import KEEP_INPUT, Engine

__all__ = ["KEEP_INPUT", "Engine"]
