"""The dev stack's state on disk: moto's backends saved to a folder and restored at start.

The local stack keeps everything in moto (runs and idempotency keys in DynamoDB, payloads and
manifests in S3, alarms in EventBridge Scheduler, delayed messages in SQS), and the moto server
runs in this process, so its in-memory backends are the whole state. They are pickled to
``<folder>/moto.pickle``: every few seconds while something changed, and once more on shutdown.
Each write goes to a temporary file that is fsynced and renamed over the old one, so a crash
leaves either the previous snapshot or the new one, never half of one.

moto requests pass through a gate while a snapshot is taken, so a snapshot never holds half of
a request (half of a transaction, for example).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import pickle
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import moto
from moto.backends import get_backend

__all__ = [
    "DEFAULT_FOLDER",
    "SAVED_SERVICES",
    "DevState",
    "RequestGate",
    "StateError",
]

DEFAULT_FOLDER = ".relayflow"
"""The state folder, relative to the directory ``relayflow dev`` starts in."""

SAVED_SERVICES = ("dynamodb", "s3", "scheduler", "sqs")
"""The moto services the local stack uses, whose backends are saved."""

_SNAPSHOT = "moto.pickle"
_SETTINGS = "dev.json"
_LOCK = "lock"
# Bumped when the snapshot layout changes; older snapshots are refused with a clear message.
_FORMAT = 1
_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


class StateError(Exception):
    """The state folder cannot be used: taken by another stack, or a snapshot is unreadable."""


class RequestGate:
    """Lets requests through one at a time, and stops them while a snapshot is taken."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the gate: no request is served until the block ends."""
        with self._lock:
            yield

    def wrap(self, app: Callable[..., Any]) -> GatedApp:
        """A WSGI app that serves each request of ``app`` with the gate held."""
        return GatedApp(app, self)


class GatedApp:
    """A WSGI app whose requests are served with ``gate`` held.

    Attributes:
        app: The app served.
        gate: The gate held for each request (callers that reach the backends another way
            hold it too, see :mod:`relayflow.local.moto_direct`).
    """

    def __init__(self, app: Callable[..., Any], gate: RequestGate) -> None:
        self.app = app
        self.gate = gate

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        with self.gate.hold():
            # moto answers with a finished body; read it under the gate all the same.
            return list(self.app(environ, start_response))


class _SnapshotPickler(pickle.Pickler):
    # Locks cannot be pickled: a restored backend gets fresh, unlocked ones.
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, _LOCK_TYPES):
            return (threading.RLock if "RLock" in type(obj).__name__ else threading.Lock, ())
        return NotImplemented


def _backends(services: Iterable[str]) -> dict[tuple[str, str, str], Any]:
    found: dict[tuple[str, str, str], Any] = {}
    for service in services:
        for account, region, backend in get_backend(service).iter_backends():  # type: ignore[call-overload]
            found[(service, account, region)] = backend
    return found


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a power cut
    finally:
        os.close(directory)


class DevState:
    """One state folder of ``relayflow dev``.

    Args:
        folder: Where the snapshot and the stack's settings live (created when missing).
        gate: Held while a snapshot is taken; the moto server's requests pass through it.
        interval_s: How often a snapshot is taken while something changed.
        services: The moto services saved.
    """

    def __init__(
        self,
        folder: Path,
        *,
        gate: RequestGate | None = None,
        interval_s: float = 2.0,
        services: tuple[str, ...] = SAVED_SERVICES,
    ) -> None:
        self.folder = folder
        self.gate = gate or RequestGate()
        self.interval_s = interval_s
        self.services = services
        self._lock_file: IO[str] | None = None
        self._last_digest: bytes | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._save_lock = threading.Lock()
        self.on_error: Callable[[BaseException], None] = lambda exc: None

    @property
    def snapshot_path(self) -> Path:
        """The moto snapshot file."""
        return self.folder / _SNAPSHOT

    def open(self, *, fresh: bool = False) -> None:
        """Take the folder for this stack; with ``fresh``, forget what it held.

        Raises:
            StateError: Another ``relayflow dev`` uses the folder.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        # The folder is ignored by git wherever it is created.
        ignore = self.folder / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# relayflow dev state (delete the folder to start empty)\n*\n")
        handle = (self.folder / _LOCK).open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            handle.close()
            raise StateError(
                f"another relayflow dev uses the state folder {self.folder}; stop it, or pass "
                "--state-dir to keep a separate state"
            ) from exc
        self._lock_file = handle
        if fresh:
            for name in (_SNAPSHOT, _SETTINGS):
                (self.folder / name).unlink(missing_ok=True)

    def close(self) -> None:
        """Stop saving and release the folder (after a last snapshot, see :meth:`stop`)."""
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    # -- the stack's own settings ---------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """What the stack saved about itself (its token, for example); empty at first."""
        path = self.folder / _SETTINGS
        if not path.is_file():
            return {}
        try:
            loaded = json.loads(path.read_text())
        except ValueError as exc:
            raise StateError(f"{path} is not JSON: {exc}; start with --fresh") from exc
        return loaded if isinstance(loaded, dict) else {}

    def save_settings(self, values: dict[str, Any]) -> None:
        """Save ``values`` as the stack's settings."""
        _write_atomically(self.folder / _SETTINGS, json.dumps(values, indent=2).encode())

    # -- moto ---------------------------------------------------------------------------------

    def restore(self) -> int:
        """Put the saved backends back into moto; returns how many were restored (0: none saved).

        Call it before the stack sends moto its first request.

        Raises:
            StateError: The snapshot is unreadable or was written by another moto version.
        """
        path = self.snapshot_path
        if not path.is_file():
            return 0
        try:
            snapshot = pickle.loads(path.read_bytes())
        except Exception as exc:
            raise StateError(
                f"the saved state {path} cannot be read ({type(exc).__name__}: {exc}); "
                "start with --fresh to begin empty"
            ) from exc
        if not isinstance(snapshot, dict) or snapshot.get("format") != _FORMAT:
            raise StateError(f"{path} is not a relayflow dev snapshot; start with --fresh")
        if snapshot.get("moto") != moto.__version__:
            raise StateError(
                f"{path} was saved with moto {snapshot.get('moto')}, this is moto "
                f"{moto.__version__}; start with --fresh to begin empty"
            )
        backends: dict[tuple[str, str, str], Any] = snapshot["backends"]
        with self.gate.hold():
            for (service, account, region), backend in backends.items():
                get_backend(service)[account][region] = backend  # type: ignore[call-overload]
            _index_buckets(backends)
        self._last_digest = hashlib.sha256(path.read_bytes()).digest()
        return len(backends)

    def save(self) -> bool:
        """Snapshot moto now, if anything changed since the last one; True when written."""
        with self._save_lock:
            with self.gate.hold():
                buffer = io.BytesIO()
                snapshot = {
                    "format": _FORMAT,
                    "moto": moto.__version__,
                    "backends": _backends(self.services),
                }
                _SnapshotPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(snapshot)
            data = buffer.getvalue()
            digest = hashlib.sha256(data).digest()
            if digest == self._last_digest:
                return False
            _write_atomically(self.snapshot_path, data)
            self._last_digest = digest
            return True

    def start(self) -> None:
        """Snapshot every ``interval_s`` seconds in a background thread, until :meth:`stop`."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="relayflow-state", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background snapshots and take a last one."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.save()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.save()
            except Exception as exc:
                self.on_error(exc)


def _index_buckets(backends: dict[tuple[str, str, str], Any]) -> None:
    """Give moto's index of bucket names the restored buckets.

    S3 finds a bucket, and refuses to create one that exists, through a name index kept
    beside the backends, not in them. Without it, the stack's ``CreateBucket`` at start
    would replace each restored bucket with an empty one.
    """
    from moto.s3.models import s3_backends

    for (service, account, partition), backend in backends.items():
        if service != "s3":
            continue
        for name in [*backend.buckets, *getattr(backend, "table_buckets", {})]:
            s3_backends.bucket_accounts[name] = (partition, account)


def gate_moto_server(server: Any, gate: RequestGate) -> None:
    """Route the requests of moto's ``ThreadedMotoServer`` (started) through ``gate``."""
    wsgi_server = server._server  # werkzeug's server, which calls ``.app`` per request
    wsgi_server.app = gate.wrap(wsgi_server.app)
