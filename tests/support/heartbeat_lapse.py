"""A run of ours whose Hudi heartbeat lapses midway, and Apache Hudi taking its instant over.

Apache Hudi counts a heartbeat expired after ``interval * tolerable misses`` (120 s by
default; ``hudi_expiry_s`` here, as a Hudi writer configured for a short one would). At a
fault step, for longer than half that, storage either refuses every write of a heartbeat
(``.hoodie/.heartbeat/``) or holds it unanswered, as a store's outage or a process stall
would leave it. Hudi, which judges a run by its heartbeat's age alone, then takes the
instant over: its own run keeps the heartbeat now (Hudi's form, empty). Storage answers
again (a held write lands then), the run's lock beats on for a while, and the run goes on
towards its publish.
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from streamer import faults
from streamer.fs import FileSystem
from streamer.table.properties import METAFOLDER
from streamer.table.timeline import HEARTBEAT_FOLDER
from streamer.write import lock


@contextlib.contextmanager
def hudi_takes_over_at(fs: FileSystem, label: str, table: str, *, stalled: Literal["refused", "held"],
                       hudi_expiry_s: float = 2.0) -> Iterator[list[Path]]:
    """While inside, the fault step ``label`` of a run writing the table ``table`` through
    ``fs`` lapses its heartbeat, its writes ``stalled`` so, and hands the instant to Hudi
    (module doc). Yields a list that then holds the heartbeat Hudi took over (the run's
    own, the only one kept then)."""
    beats = Path(table, METAFOLDER, HEARTBEAT_FOLDER)
    taken: list[Path] = []
    real_step, real_write, real_expiry = faults.step, fs.write_atomic, lock.HUDI_HEARTBEAT_EXPIRY_S
    stalling, answered, reached = threading.Event(), threading.Event(), threading.Event()

    def write(path: str, data: bytes) -> None:
        if stalling.is_set() and "/.heartbeat/" in path:
            if stalled == "refused":
                raise OSError(errno.EIO, "heartbeat write refused", path)
            answered.wait(30)  # held: lands once storage answers again
        real_write(path, data)

    def step(name: str) -> None:
        if name == label and not reached.is_set():
            reached.set()
            [beat] = [p for p in beats.iterdir() if p.read_bytes()]
            taken.append(beat)
            stalling.set()
            time.sleep(hudi_expiry_s * 0.75)  # past half of Hudi's expiry
            beat.write_bytes(b"")  # Hudi's run of the instant keeps it now
            stalling.clear()
            answered.set()
            time.sleep(hudi_expiry_s / 4)  # the lock's beats go on meanwhile
        real_step(name)

    fs.write_atomic = write  # type: ignore[method-assign]
    faults.step = step
    lock.HUDI_HEARTBEAT_EXPIRY_S = hudi_expiry_s
    try:
        yield taken
    finally:
        lock.HUDI_HEARTBEAT_EXPIRY_S = real_expiry
        faults.step = real_step
        del fs.write_atomic
        answered.set()
    assert reached.is_set(), f"the run never reached the fault step {label!r}"
