"""Repair of tables written with a known format bug of an earlier version of this project.

The only such bug so far: ``hoodie.table.log.file.format=PARQUET|AVRO`` in
``hoodie.properties`` (see :func:`streamer.table.properties.format_problems`), which makes
Apache Hudi ignore every log file. The repair rewrites ``hoodie.properties`` atomically
(one rename) under the table's writer lock, so no writer or service commits from a
half-repaired view; the data files are already correct and are not touched.
"""

from __future__ import annotations

import logging

from streamer.fs import FileSystem
from streamer.table.properties import (
    format_problems,
    load_properties,
    repaired_properties,
    write_properties,
)
from streamer.write.lock import WriterLock

log = logging.getLogger(__name__)


def repair_table_format(
    fs: FileSystem, base_path: str, *, lock_timeout_s: float = 30.0, dry_run: bool = False
) -> list[str]:
    """Fix ``hoodie.properties`` of the table at ``base_path``; the problems it had.

    An empty list means there was nothing to repair. ``dry_run`` only reports.
    """
    problems = format_problems(load_properties(fs, base_path))
    if not problems or dry_run:
        return problems
    with WriterLock(fs, base_path, timeout_s=lock_timeout_s, purpose="repair"):
        props = load_properties(fs, base_path)  # again, under the lock
        problems = format_problems(props)
        if problems:
            write_properties(fs, base_path, repaired_properties(props))
            log.warning("repaired hoodie.properties of %s: %s", base_path, "; ".join(problems))
    return problems
