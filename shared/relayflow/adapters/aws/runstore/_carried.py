"""The usage one save of a run stores: what the run's record held, what was counted for the
run since, and what the save's own writes cost (priced before they are sent).

What was counted is taken from the meter as late as possible (when the header is priced), so
that the work a save does before its header (payload objects, pages) is part of it; whatever
the save took goes back to the meter if it fails, for the run's next save to carry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from relayflow.costs.meter import UsageMeter
from relayflow.costs.usage import RunUsage

if TYPE_CHECKING:
    from relayflow.adapters.aws.runstore._snapshot import RunSnapshot
    from relayflow.core.record import RunRecord


@contextlib.contextmanager
def carrying_usage(
    record: RunRecord, old: RunSnapshot | None, meter: UsageMeter | None
) -> Iterator[CarriedUsage]:
    """The usage a save of ``record`` stores: the stored run's plus what was counted for it
    until its header is written (given back to the meter if the save fails, for the next
    one to carry)."""
    stored = old.record.usage if old is not None and old.record is not None else None
    carried = CarriedUsage(record.id, record.usage, stored, meter)
    try:
        yield carried
    except BaseException:
        carried.give_back()
        raise


class CarriedUsage:
    """The usage a save of ``run_id`` stores (see the module docstring).

    Args:
        run_id: The run saved.
        given: The usage of the record given to the store (kept as is without a meter).
        stored: The usage of the stored version the save replaces (None for a new run or
            one stored without usage).
        meter: Where usage pending for the run is taken from (None: none is counted).
    """

    def __init__(
        self,
        run_id: str,
        given: RunUsage | None,
        stored: RunUsage | None,
        meter: UsageMeter | None,
    ) -> None:
        self.run_id = run_id
        self._given = given
        self._stored = stored
        self._meter = meter
        self._taken: RunUsage | None = None

    @property
    def counting(self) -> bool:
        """Whether the save adds what was counted for the run to what it stores."""
        return self._meter is not None

    def base(self) -> RunUsage | None:
        """The stored usage plus what was counted for the run (taken once, on first call)."""
        if self._meter is None:
            return self._given
        if self._taken is None:
            self._taken = self._meter.take(self.run_id)
        if self._stored is None:
            return None if self._taken.is_empty else self._taken
        return self._stored.plus(self._taken)

    def with_own(self, own: RunUsage) -> RunUsage | None:
        """:meth:`base` plus the save's own writes."""
        base = self.base()
        if own.is_empty:
            return base
        return own if base is None else base.plus(own)

    def not_stored(self, usage: RunUsage) -> None:
        """Hold ``usage`` (work done for a save that did not store it) for the next save."""
        if self._meter is not None and not usage.is_empty:
            self._meter.add(self.run_id, usage)

    def give_back(self) -> None:
        """The save failed: what it took waits for the next one."""
        if self._taken is not None:
            self.not_stored(self._taken)
            self._taken = None
