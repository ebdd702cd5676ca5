"""Per-plan locks: several compactors may run, each plan executes exactly once.

Hudi leaves "which compactor runs which plan" to an external coordinator (ZooKeeper).
We use the table's own storage: ``.hoodie/.aux/.locks/<name>`` is a
:class:`streamer.write.lock.FileLock` - the same exclusive-create, heartbeated lock with
stale takeover that guards writers - so a taker of a dead run's lock finds the plan
inflight and rolls the dead run back before executing it again.
"""

from __future__ import annotations

import posixpath

from streamer.fs import FileSystem
from streamer.table.properties import METAFOLDER
from streamer.write.lock import FileLock, LockInfo, pid_alive

LOCKS_DIR = posixpath.join(".aux", ".locks")

__all__ = ["LOCKS_DIR", "LockInfo", "PlanLock", "create_exclusive", "locks_dir", "pid_alive"]


def locks_dir(base_path: str) -> str:
    return posixpath.join(base_path, METAFOLDER, LOCKS_DIR)


def create_exclusive(fs: FileSystem, path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` only if absent (see :meth:`FileSystem.create_exclusive`)."""
    return fs.create_exclusive(path, data)


class PlanLock(FileLock):
    """Exclusive, heartbeated ownership of one named thing (usually a plan's instant)."""

    def __init__(self, fs: FileSystem, base_path: str, name: str, *, expiry_s: float = 30.0,
                 purpose: str = "", path: str | None = None) -> None:
        super().__init__(fs, path or posixpath.join(locks_dir(base_path), name), expiry_s=expiry_s,
                         purpose=purpose)

    def __enter__(self) -> PlanLock:
        return self
