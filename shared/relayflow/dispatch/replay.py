"""The signatures a step host accepted, so that a captured copy of a request runs nothing.

A signed step request can be sent again by whoever captured it, and its signature still
verifies until the request's bound: five minutes after it was signed or its ``deadline``,
whichever comes first (``relayflow`` mode), its ``deadline`` alone (``voyant`` mode, whose
signature carries no time). A host remembers each signature it accepted until that bound and
refuses a second one with 409 ``request_replayed``.

The record lives in the process: hosts behind a load balancer or several Lambda instances
each keep their own, so a copy sent to another process is not recognised by it. Hosts that
make each step durable in the run's checkpoint log also claim the invocation's first slot
before anything runs (:meth:`relayflow.sdk.checkpoints.Checkpointer.claim`), which holds
across processes.
"""

from __future__ import annotations

import heapq
import threading
from collections import deque

from relayflow.errors import RelayflowError
from relayflow.errors import ReplayRecordFullError as ReplayRecordFullError
from relayflow.protocol import NO_DEADLINE, REQUEST_REPLAYED

#: Signatures kept at most: at 48 bytes of MAC and bound each (plus the dict's own), about
#: 20 MB when full, enough for 300 accepted requests a second over a five-minute window.
DEFAULT_CAPACITY = 100_000


class RequestReplayedError(RelayflowError):
    """A step host already accepted this signed request (HTTP 409)."""

    code = REQUEST_REPLAYED


class AcceptedSignatures:
    """A bounded, thread-safe record of the signatures a host accepted, each until its bound.

    A signature whose request has no deadline (``voyant`` mode with the protocol's "none",
    what the reference's orchestrator sends) has no bound: it is kept while there is room,
    and the oldest such is forgotten first when the record is full.

    Args:
        capacity: Signatures kept at most; when full of unexpired, bounded ones, new
            requests are refused (:class:`ReplayRecordFullError`): no signature that still
            verifies within a bound is forgotten early.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._until: dict[bytes, int] = {}
        self._by_expiry: list[tuple[int, bytes]] = []
        self._unbounded: deque[bytes] = deque()
        self._lock = threading.Lock()

    def accept(self, mac: bytes, *, valid_until_ms: int, now_ms: int) -> None:
        """Remember ``mac`` until ``valid_until_ms``.

        Raises:
            RequestReplayedError: ``mac`` was accepted before and its bound has not passed.
            ReplayRecordFullError: The record holds ``capacity`` unexpired signatures.
        """
        with self._lock:
            self._forget_expired(now_ms)
            if mac in self._until:
                raise RequestReplayedError(
                    "this signed step request was already accepted; a copy is refused until "
                    "its signature expires"
                )
            if len(self._until) >= self.capacity:
                if not self._unbounded:
                    raise ReplayRecordFullError(
                        f"the host holds {self.capacity} unexpired signatures; try again later"
                    )
                del self._until[self._unbounded.popleft()]
            self._until[mac] = valid_until_ms
            if valid_until_ms >= NO_DEADLINE:
                self._unbounded.append(mac)
            else:
                heapq.heappush(self._by_expiry, (valid_until_ms, mac))

    def __len__(self) -> int:
        with self._lock:
            return len(self._until)

    def _forget_expired(self, now_ms: int) -> None:
        # A signature is refused by the signer itself once its bound has passed.
        while self._by_expiry and self._by_expiry[0][0] < now_ms:
            _, mac = heapq.heappop(self._by_expiry)
            self._until.pop(mac, None)
