"""A run of ours whose Hudi heartbeat lapses midway, and Apache Hudi taking its instant over.

At a fault step, storage refuses every write of a heartbeat (``.hoodie/.heartbeat/``)
for ``refused_s`` seconds - longer than the run's lock trusts its heartbeat - as a
process stall or a store's outage would leave it. Apache Hudi, which judges a run by its
heartbeat's age alone, then takes the instant over: its own run keeps the heartbeat now
(Hudi's form, empty). Storage takes writes again, the run's lock beats on for a while, and
the run goes on towards its publish.
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from streamer import faults
from streamer.fs import FileSystem
from streamer.table.properties import METAFOLDER
from streamer.table.timeline import HEARTBEAT_FOLDER


@contextlib.contextmanager
def hudi_takes_over_at(fs: FileSystem, label: str, table: str, *, refused_s: float) -> Iterator[list[Path]]:
    """While inside, the fault step ``label`` of a run writing the table ``table`` through
    ``fs`` lapses its heartbeat and hands the instant to Hudi, as above. Yields a list that
    then holds the heartbeat Hudi took over (the run's own, the only one kept then)."""
    beats = Path(table, METAFOLDER, HEARTBEAT_FOLDER)
    taken: list[Path] = []
    real_step, real_write = faults.step, fs.write_atomic
    refusing, reached = threading.Event(), threading.Event()

    def write(path: str, data: bytes) -> None:
        if refusing.is_set() and "/.heartbeat/" in path:
            raise OSError(errno.EIO, "heartbeat write refused", path)
        real_write(path, data)

    def step(name: str) -> None:
        if name == label and not reached.is_set():
            reached.set()
            [beat] = [p for p in beats.iterdir() if p.read_bytes()]
            taken.append(beat)
            refusing.set()
            time.sleep(refused_s)
            beat.write_bytes(b"")  # Hudi's run of the instant keeps it now
            refusing.clear()
            time.sleep(refused_s / 2)  # the lock's beats go on meanwhile
        real_step(name)

    fs.write_atomic = write  # type: ignore[method-assign]
    faults.step = step
    try:
        yield taken
    finally:
        faults.step = real_step
        del fs.write_atomic
    assert reached.is_set(), f"the run never reached the fault step {label!r}"
