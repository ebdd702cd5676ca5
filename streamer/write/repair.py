"""Repair of tables written with a known format bug of an earlier version of this project.

Two such bugs so far: ``hoodie.table.log.file.format=PARQUET|AVRO`` in
``hoodie.properties`` (see :func:`streamer.table.properties.format_problems`), which makes
Apache Hudi ignore every log file, and empty ``<ts>.clean.inflight`` files, which make
Hudi's archiver fail. Each fix is one atomic write under the table's writer lock, so no
writer or service commits from a half-repaired view; data files are correct and untouched.
"""

from __future__ import annotations

import logging
import posixpath

from streamer.fs import FileSystem
from streamer.table.properties import (
    METAFOLDER,
    format_problems,
    load_properties,
    repaired_properties,
    write_properties,
)
from streamer.write.lock import WriterLock

log = logging.getLogger(__name__)


def empty_clean_inflights(fs: FileSystem, base_path: str) -> list[tuple[str, str]]:
    """``(inflight, requested)`` paths of cleans whose inflight file is empty.

    Versions of this project before 0.2 left ``<ts>.clean.inflight`` empty. Hudi's
    archiver decodes that file as the clean's plan (``MetadataConversionUtils``) and fails
    on an empty one (``InvalidAvroMagicException``): every Hudi write with archiving then
    fails. Hudi's ``CleanActionExecutor`` writes the plan there; the fix copies it over.
    Found from one listing of ``.hoodie/`` (sizes only, nothing read).
    """
    meta = posixpath.join(base_path, METAFOLDER)
    sizes = {st.name: st.size for st in fs.list_dir(meta) if not st.is_dir}
    out = []
    for name, size in sizes.items():
        if name.endswith(".clean.inflight") and size == 0:
            requested = name[: -len("inflight")] + "requested"
            if sizes.get(requested):
                out.append((posixpath.join(meta, name), posixpath.join(meta, requested)))
    return sorted(out)


def table_problems(fs: FileSystem, base_path: str) -> list[str]:
    """Everything :func:`repair_table_format` would fix, described (empty: nothing)."""
    problems = format_problems(load_properties(fs, base_path))
    for inflight, _ in empty_clean_inflights(fs, base_path):
        problems.append(
            f"{posixpath.basename(inflight)} is empty: Hudi's archiver reads the clean plan from "
            "it and fails (every Hudi write with archiving would fail)"
        )
    return problems


def repair_table_format(
    fs: FileSystem, base_path: str, *, lock_timeout_s: float = 30.0, dry_run: bool = False
) -> list[str]:
    """Fix what earlier versions of this project wrote wrongly; the problems it had.

    ``hoodie.properties`` (:func:`~streamer.table.properties.format_problems`) and empty
    clean inflight files (:func:`empty_clean_inflights`). An empty list means there was
    nothing to repair. ``dry_run`` only reports.
    """
    problems = table_problems(fs, base_path)
    if not problems or dry_run:
        return problems
    with WriterLock(fs, base_path, timeout_s=lock_timeout_s, purpose="repair"):
        problems = table_problems(fs, base_path)  # again, under the lock
        props = load_properties(fs, base_path)
        if format_problems(props):
            write_properties(fs, base_path, repaired_properties(props))
        for inflight, requested in empty_clean_inflights(fs, base_path):
            fs.write_atomic(inflight, fs.read_bytes(requested))
        if problems:
            log.warning("repaired %s: %s", base_path, "; ".join(problems))
    return problems
