"""Audit: the metadata our writer and services write, key by key, against Apache Hudi 0.15.

Both tables get the same history - record key ``id``, partition ``city``, precombine
``ts``; upserts, a delete, a log compaction, a compaction, a clean, a rollback and
enough commits to archive - once written by Hudi 0.15 itself, once by our writer and
services. Then commit metadata (JSON), plans and clean/rollback metadata (Avro
containers: writer schema and records) and the archived timeline must have the same
keys and value types, except the differences listed in :data:`ALLOWED`, each justified
where we write it and in ``docs/hudi-format-audit.md``. Finally Hudi 0.15 and 1.0 must
read our archived table incrementally from before its first instant, and Hudi 0.15 must
archive further on top of our archive without losing a row.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from streamer.config.policies import (
    ArchivePolicy,
    CleanPolicy,
    CompactionPolicy,
    LogCompactionPolicy,
)
from streamer.fs import FileSystem
from streamer.read import Table
from streamer.services.archive import LEGACY_FILES_FIELD, run_archive, upgrade_legacy_archives
from streamer.services.clean import run_clean
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.services.log_compaction import schedule_log_compaction
from streamer.table.archived_commits import archived_write_extras
from streamer.table.log_content import split_avro_records
from streamer.table.log_format import BlockType, HeaderKey, encode_block, read_log_file
from streamer.table.properties import load_properties
from tests.support import block_tables as tg
from tests.support.failed_write import fail_before_complete
from tests.support.hudi import HudiOracleError
from tests.support.hudi_options import HUDI_WRITE as HUDI_CONTINUE

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]

HUDI_WRITE = {
    **HUDI_CONTINUE,
    # our writer drops the metadata table; compare like with like
    "hoodie.metadata.enable": "false",
    "hoodie.compact.inline": "false",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
}
LOG_COMPACT = {"hoodie.log.compaction.enable": "true", "hoodie.log.compaction.inline": "true",
               "hoodie.log.compaction.blocks.threshold": "2"}
COMPACT = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1"}
CLEAN = {"hoodie.clean.automatic": "true", "hoodie.cleaner.commits.retained": "1"}
# (Hudi's archiver keeps the delta commits a NUM_COMMITS compaction trigger still counts:
# CompactionUtils.getOldestInstantToRetainForCompaction with this maximum; compaction
# itself stays off)
ARCHIVE = {"hoodie.archive.automatic": "true", "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
           "hoodie.cleaner.commits.retained": "1", "hoodie.compact.inline.max.delta.commits": "1"}
FALLBACK = {"hoodie.datasource.read.incr.fallback.fulltablescan.enable": "true"}

#: Differences we keep, by metadata kind: key path (prefix) -> why Hudi accepts ours.
#: The full argument, with Hudi source paths, is in docs/hudi-format-audit.md.
ALLOWED: dict[str, dict[str, str]] = {
    "deltacommit.inflight": {
        # Hudi writes its workload profile there; ours is empty (streamer/write/writer.py).
        # Hudi reads it only for a listing-based rollback (markers disabled):
        # ListingBasedRollbackStrategy; marker-based rollback is the default.
        "partitionToWriteStats.*": "inflight workload profile not written (read only by listing rollback)",
    },
    "logcompaction.requested": {
        "extraMetadata.mor_streamer.logcompaction.runs": "which units each run stitches; opaque to "
        "Hudi's executor (RunCompactionActionExecutor ignores plan extraMetadata)",
        "strategy.strategyParams.": "our planner's parameters; HoodieCompactor reads only compactorClassName",
        "extraMetadata.operationType": "names the plan's operation (LOG_COMPACT); opaque to Hudi",
    },
    "hoodie.properties": {
        "hoodie.table.create.schema": "the writer's schema when a table is created with one (Hudi's SQL "
        "CREATE TABLE writes it too: HoodieTableConfig.CREATE_SCHEMA; TableSchemaResolver falls back to it)",
    },
}

WILD = {"partitionToWriteStats", "partitionMetadata", "filePathsToBeDeletedPerPartition",
        "filesToBeDeletedPerPartition", "logBlocksToBeDeleted", "rollbackLogFiles", "logFilesFromFailedCommit",
        "partitionToReplaceFileIds", "bootstrapPartitionMetadata"}


# ======================================================================================= shapes
def _type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", dict: "object", list: "array", bytes: "bytes"}[type(v)]


def value_shape(v: Any, prefix: str = "", out: dict | None = None, wild: bool = False) -> dict[str, set[str]]:
    """key path -> value types; keys of partition-like maps become ``*``."""
    out = {} if out is None else out
    out.setdefault(prefix or "$", set()).add(_type(v))
    if isinstance(v, dict):
        for k, x in v.items():
            key = "*" if wild else k
            value_shape(x, f"{prefix}.{key}" if prefix else key, out, k in WILD)
    elif isinstance(v, list):
        for x in v:
            value_shape(x, prefix + "[]", out)
    return out


def schema_shape(s: Any, prefix: str = "", out: dict | None = None) -> dict[str, set[str]]:
    """key path -> Avro types (record names, union branches), field order ignored."""
    out = {} if out is None else out
    if isinstance(s, list):
        out.setdefault(prefix + "|union", set()).add(json.dumps([_branch(b) for b in s]))
        for b in s:
            schema_shape(b, prefix, out)
    elif isinstance(s, dict):
        t = s["type"]
        if t == "record":
            out.setdefault(prefix + "|record", set()).add(s["name"].split(".")[-1])
            for f in s["fields"]:
                schema_shape(f["type"], f"{prefix}.{f['name']}" if prefix else f["name"], out)
        elif t == "array":
            schema_shape(s["items"], prefix + "[]", out)
        elif t == "map":
            schema_shape(s["values"], prefix + "{}", out)
        else:
            schema_shape(t, prefix, out)
    else:
        out.setdefault(prefix, set()).add(s.split(".")[-1])
    return out


def _branch(b: Any) -> str:
    if isinstance(b, dict):
        return b["name"].split(".")[-1] if b["type"] == "record" else str(b["type"])
    return b.split(".")[-1]


def merge(into: dict[str, set[str]], more: dict[str, set[str]]) -> dict[str, set[str]]:
    for k, v in more.items():
        into.setdefault(k, set()).update(v)
    return into


def differences(hudi: dict[str, set[str]], ours: dict[str, set[str]]) -> dict[str, tuple]:
    return {k: (sorted(hudi.get(k, ())), sorted(ours.get(k, ())))
            for k in set(hudi) | set(ours) if hudi.get(k) != ours.get(k)}


def _allowed(path: str, entry: str) -> bool:
    """``entry`` covers ``path`` itself and everything below it (an entry ending in ``.``:
    every key below it)."""
    if entry.endswith("."):
        return path.startswith(entry)
    return path == entry or path.startswith((entry + ".", entry + "["))


def unexplained(kind: str, diff: dict[str, tuple]) -> dict[str, tuple]:
    allowed = ALLOWED.get(kind, {})
    return {k: v for k, v in diff.items() if not any(_allowed(k, a) for a in allowed)}


# ======================================================================================= files
def timeline_files(folder: str) -> dict[str, list[str]]:
    """Timeline files by kind (``deltacommit``, ``clean.requested``, ...); a completed log
    compaction is ``logcompaction deltacommit``, a completed compaction ``compaction commit``."""
    names = sorted(n for n in os.listdir(folder) if n[:1].isdigit())
    requested = {n.split(".")[0]: n.split(".")[1] for n in names if n.endswith(".requested")}
    out: dict[str, list[str]] = {}
    for n in names:
        ts, kind = n.split(".", 1)
        if kind in ("deltacommit", "commit") and requested.get(ts) in ("logcompaction", "compaction"):
            kind = f"{requested[ts]} {kind}"
        out.setdefault(kind, []).append(os.path.join(folder, n))
    return out


def decode(path: str) -> tuple[str, dict | None, list[Any]]:
    data = Path(path).read_bytes()
    if not data:
        return "empty", None, []
    if data.startswith(b"Obj\x01"):
        reader = fastavro.reader(io.BytesIO(data))
        return "avro", reader.writer_schema, list(reader)
    return "json", None, [json.loads(data)]


def kind_shapes(files: list[str]) -> tuple[set[str], dict, dict]:
    fmts: set[str] = set()
    schema: dict[str, set[str]] = {}
    values: dict[str, set[str]] = {}
    for p in files:
        fmt, s, recs = decode(p)
        fmts.add(fmt)
        if s is not None:
            merge(schema, schema_shape(s))
        for r in recs:
            merge(values, value_shape(r))
    return fmts, schema, values


def archive_records(folder: str, only: list[str] | None = None) -> tuple[list[str], list[dict], list[tuple[dict, bytes]]]:
    """(archive file names, block headers, (writer schema, datum) per record)."""
    fs = FileSystem()
    names = sorted(n for n in os.listdir(folder) if n.startswith(".commits_.archive") and (only is None or n in only))
    headers, datums = [], []
    for n in names:
        for b in read_log_file(fs, os.path.join(folder, n), lazy=False):
            assert b.block_type == BlockType.AVRO_DATA, (n, b.block_type)
            headers.append({HeaderKey(k).name: len(split_avro_records(b.content(), n)) for k in b.header})
            (version,) = struct.unpack_from(">i", b.content(), 0)
            assert version == 3, (n, version)
            datums.extend((b.schema, bytes(d)) for d in split_avro_records(b.content(), n))
    return names, headers, datums


# ======================================================================================= builders
@dataclass
class Built:
    hudi: str
    hudi_timeline: str  # copy of Hudi's .hoodie just before it archived
    hudi_properties: dict[str, str]
    ours: str
    ours_timeline: str  # copy of our .hoodie just before we archived
    ours_unarchived: str  # copy of our table just before we archived
    ours_model: tg.Model


def _build_hudi(session, root: Path) -> tuple[str, str, dict[str, str]]:
    path = str(root / "hudi")
    gen, model = tg.Gen(0), tg.Model()

    def write(batch: pa.Table, delete: bool = False, **extra: str) -> None:
        opts = dict(HUDI_WRITE, **extra)
        if delete:
            opts["hoodie.datasource.write.operation"] = "delete"
        session.write(path, batch, opts)
        model.apply(deletes=batch) if delete else model.apply(batch)

    write(gen.upserts(120))
    props = dict(load_properties(FileSystem(), path).raw)
    write(gen.upserts(12))
    write(gen.deletes(model, 4), delete=True)
    write(gen.upserts(12), **LOG_COMPACT)
    write(gen.upserts(12), **COMPACT)
    write(gen.upserts(12))
    write(gen.upserts(12), **CLEAN)
    last = sorted(n for n in os.listdir(f"{path}/.hoodie") if n.endswith(".deltacommit"))[-1].split(".")[0]
    # the procedure wants a catalog table (DROP TABLE is broken in 0.15's bundle on Spark
    # 3.5.3: NoSuchMethodError in invalidateCachedTable), so a fresh external name each run
    name = f"audit_{uuid.uuid4().hex[:12]}"
    session.sql(f"CREATE TABLE {name} USING hudi LOCATION '{path}'")
    session.sql(f"CALL rollback_to_instant(table => '{name}', instant_time => '{last}')")
    write(gen.upserts(12))
    snap = str(root / "hudi_timeline")
    shutil.copytree(f"{path}/.hoodie", snap)
    write(gen.upserts(12), **ARCHIVE)
    return path, snap, props


def _failed_write(w) -> None:
    """A write that dies before completing: updates into logs and, with many new keys,
    new file groups (base files), as the write Hudi rolls back above touched both."""
    fail_before_complete(lambda: w.upsert(tg.Gen(7, key_space=100_000).upserts(600, tag="lost")))


def _build_ours(root: Path) -> tuple[str, str, str, tg.Model]:
    path = str(root / "ours")
    w, gen, model = tg.build(path, 6, deletes_every=3)
    lc = schedule_log_compaction(Table.open(path), LogCompactionPolicy(min_blocks=3))
    assert lc is not None and execute(Table.open(path), lc).status == "completed"
    tg.step(w, gen, model)
    # four compaction + clean rounds: more cleans than Hudi's archiver keeps (keep.max 3)
    for i in range(4):
        comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        assert comp is not None and execute(Table.open(path), comp).status == "completed"
        tg.step(w, gen, model)
        assert run_clean(Table.open(path), CleanPolicy(retain_commits=1)).instant is not None
        if i == 0:
            _failed_write(w)
            tg.step(w, gen, model)  # rolls the failed write back first
    unarchived = str(root / "ours_unarchived")
    shutil.copytree(path, unarchived)
    snap = str(root / "ours_timeline")
    shutil.copytree(f"{path}/.hoodie", snap, ignore=shutil.ignore_patterns("archived", ".*"))
    assert run_archive(Table.open(path), ArchivePolicy(min_commits=2, max_commits=3)).archived
    return path, snap, unarchived, model


@pytest.fixture(scope="module")
def built(tmp_path_factory, hudi015) -> Built:
    root = tmp_path_factory.mktemp("audit")
    hudi, hudi_snap, props = _build_hudi(hudi015, root)
    ours, ours_snap, unarchived, model = _build_ours(root)
    return Built(hudi, hudi_snap, props, ours, ours_snap, unarchived, model)


# ======================================================================================= tests
def test_both_histories_have_every_kind(built):
    kinds = {"deltacommit", "logcompaction deltacommit", "compaction commit", "logcompaction.requested",
             "compaction.requested", "clean.requested", "clean", "rollback.requested", "rollback"}
    assert kinds <= set(timeline_files(built.hudi_timeline)), sorted(timeline_files(built.hudi_timeline))
    assert kinds <= set(timeline_files(built.ours_timeline)), sorted(timeline_files(built.ours_timeline))
    assert any(n.startswith(".commits_.archive.") for n in os.listdir(f"{built.hudi}/.hoodie/archived"))
    assert any(n.startswith(".commits_.archive.") for n in os.listdir(f"{built.ours}/.hoodie/archived"))


def test_timeline_files_match_hudi_key_by_key(built):
    """Every timeline file kind: same format, same Avro schema shape, same keys and types."""
    hudi, ours = timeline_files(built.hudi_timeline), timeline_files(built.ours_timeline)
    problems = {}
    used = set()
    for kind in sorted(set(hudi) & set(ours)):
        h_fmt, h_schema, h_values = kind_shapes(hudi[kind])
        o_fmt, o_schema, o_values = kind_shapes(ours[kind])
        assert h_fmt == o_fmt, (kind, h_fmt, o_fmt)
        for what, diff in (("schema", differences(h_schema, o_schema)), ("values", differences(h_values, o_values))):
            left = unexplained(kind, diff)
            if left:
                problems[f"{kind} ({what})"] = left
            used |= {(kind, a) for a in ALLOWED.get(kind, {}) for k in diff if _allowed(k, a)}
    assert not problems, json.dumps(problems, indent=1, default=str)
    # and the allow-list holds no stale entry
    listed = {(kind, a) for kind, entries in ALLOWED.items() if kind != "hoodie.properties" for a in entries}
    assert listed == used, sorted(listed - used)


def test_commit_metadata_values_match_hudi(built):
    """operationType and compacted per commit kind; extraMetadata keys of Hudi's are ours too."""
    def facts(folder: str) -> dict[str, set]:
        out: dict[str, set] = {}
        for kind, files in timeline_files(folder).items():
            if kind not in ("deltacommit", "logcompaction deltacommit", "compaction commit"):
                continue
            for p in files:
                meta = decode(p)[2][0]
                out.setdefault(kind, set()).add((meta["operationType"], meta["compacted"], tuple(sorted(meta["extraMetadata"]))))
        return out

    assert facts(built.hudi_timeline) == facts(built.ours_timeline)


def test_hoodie_properties_keys_match_hudi(built):
    ours = dict(load_properties(FileSystem(), built.ours).raw)
    diff = differences({k: {"key"} for k in built.hudi_properties}, {k: {"key"} for k in ours})
    assert not unexplained("hoodie.properties", diff), diff


def _entries(folder: str, only: list[str] | None = None) -> dict[tuple[str, str], list[dict]]:
    _, _, datums = archive_records(folder, only)
    out: dict[tuple[str, str], list[dict]] = {}
    for schema, datum in datums:
        rec = fastavro.schemaless_reader(io.BytesIO(datum), fastavro.parse_schema(schema))
        out.setdefault((rec["actionType"], rec["actionState"]), []).append(rec)
    return out


def test_archived_timeline_matches_hudi(built):
    hudi_dir, ours_dir = f"{built.hudi}/.hoodie/archived", f"{built.ours}/.hoodie/archived"
    h_names, h_headers, h_datums = archive_records(hudi_dir)
    o_names, o_headers, o_datums = archive_records(ours_dir)
    pattern = re.compile(r"^\.commits_\.archive\.\d+_1-0-1$")
    assert all(pattern.match(n) for n in h_names + o_names), (h_names, o_names)
    # blocks: a SCHEMA header only, at most Hudi's batch of 10 records
    assert {tuple(h) for h in h_headers} == {tuple(h) for h in o_headers} == {("SCHEMA",)}
    assert max(n for h in o_headers for n in h.values()) <= 10
    # which metadata each (action, state) entry carries
    h_entries, o_entries = _entries(hudi_dir), _entries(ours_dir)
    filled = lambda recs: {tuple(sorted(k for k, v in r.items() if v is not None)) for r in recs}  # noqa: E731
    common = set(h_entries) & set(o_entries)
    assert {("deltacommit", "COMPLETED"), ("logcompaction", "REQUESTED")} <= common, sorted(common)
    for key in common:
        assert filled(h_entries[key]) == filled(o_entries[key]), key
    # the Avro commit metadata inside: same keys and types
    h_shape: dict[str, set[str]] = {}
    o_shape: dict[str, set[str]] = {}
    # (completed entries: the details Hudi's reader loads; an inflight entry carries the
    # inflight file's content, see ALLOWED["deltacommit.inflight"])
    for key in common:
        if key[1] != "COMPLETED":
            continue
        for r in h_entries[key]:
            if r.get("hoodieCommitMetadata"):
                merge(h_shape, value_shape(r["hoodieCommitMetadata"]))
        for r in o_entries[key]:
            if r.get("hoodieCommitMetadata"):
                merge(o_shape, value_shape(r["hoodieCommitMetadata"]))
    assert not differences(h_shape, o_shape), differences(h_shape, o_shape)
    # and Hudi's own HoodieArchivedMetaEntry schema (its reader schema) resolves our records
    hudi_schema = fastavro.parse_schema(h_datums[0][0])
    for schema, datum in o_datums:
        rec = fastavro.schemaless_reader(io.BytesIO(datum), fastavro.parse_schema(schema), hudi_schema)
        assert rec["commitTime"] and rec["actionType"] and rec["actionState"]


def test_hudis_archived_writes_keep_their_extra_metadata_for_a_resume(built):
    """A pipeline resumes from an archived write (streamer/table/archived_commits.py):
    the archive Hudi 0.15's archiver wrote lists every archived completed write, newest
    first, each with the extra metadata Hudi's writer gave it (its ``schema``)."""
    entries = _entries(f"{built.hudi}/.hoodie/archived")
    archived = {r["commitTime"] for (action, state), recs in entries.items()
                if action in ("deltacommit", "commit", "replacecommit") and state == "COMPLETED" for r in recs}
    table = Table.open(built.hudi)
    got = list(archived_write_extras(table.fs, built.hudi, table.properties, 1))
    assert archived and [ts for ts, _ in got] == sorted(archived, reverse=True)
    assert all(extra.get("schema") for _, extra in got)


def _keys(t: pa.Table) -> list[tuple[str, int]]:
    return sorted(zip(t.column("city").to_pylist(), t.column("id").to_pylist(), strict=True))


def test_hudi_reads_our_archived_table_incrementally(built, hudi015, hudi10, hudi12):
    """HoodieArchivedTimeline is loaded (with instant details) when the begin instant precedes
    the active timeline; Hudi 0.15 failed with NoSuchElementException on our former archive.
    Hudi 1.2 reads a version-6 archive (``.commits_.archive.N``) too."""
    expected = sorted(built.ours_model.rows)
    for session in (hudi015, hudi10, hudi12):
        assert _keys(session.read(built.ours)) == expected, session.version
        plain, fallback = session.read_many([
            session.read_request(built.ours, query="incremental", begin="000"),
            session.read_request(built.ours, query="incremental", begin="000", options=FALLBACK),
        ])
        for name, result in (("plain", plain), ("fallback", fallback)):
            if isinstance(result, HudiOracleError):
                pytest.fail(f"Hudi {session.version} incremental ({name}) from 000: {result}")
        # every live slice's base instant is still active (our archive bound), so the range
        # from before the first instant covers the whole table
        assert _keys(plain) == expected, session.version
        # the full-table-scan fallback returns base-file rows only - on Hudi's own tables too
        assert set(_keys(fallback)) <= set(expected)


def _hudi_archives(session, src: str, dst: str, model_rows: dict) -> set[tuple[str, str]]:
    """Hudi 0.15 writes 2 batches, cleaning and archiving inline, into a copy of ``src``: no
    failure, no lost or duplicated row; returns the (action, state) entries Hudi archived.
    (Hudi's archiver stops at the earliest commit the last clean retains, so it cleans too.)"""
    shutil.copytree(src, dst)
    before = set(os.listdir(f"{dst}/.hoodie/archived"))
    expected = dict(model_rows)
    for i in range(2):
        batch = pa.table({"id": pa.array([5000 + i, 6000 + i], pa.int64()), "city": ["sf", "nyc"],
                          "ts": pa.array([10**9, 10**9], pa.int64()), "value": [f"h{i}", f"h{i}"]})
        session.write(dst, batch, {**HUDI_WRITE, **CLEAN, **ARCHIVE})
        expected.update({(r["city"], r["id"]): r for r in batch.to_pylist()})
    assert _keys(session.read(dst)) == sorted(expected)
    added = sorted(set(os.listdir(f"{dst}/.hoodie/archived")) - before)
    assert any(n.startswith(".commits_.archive.") for n in added), added
    # the archived timeline now holds our entries and Hudi's: loading it must still work
    # (rows: those of the commits still active - Hudi's semantics, as on its own tables)
    assert set(_keys(session.read(dst, query="incremental", begin="000"))) <= set(expected)
    return set(_entries(f"{dst}/.hoodie/archived", added))


def test_hudi_archives_on_top_of_our_archive_without_loss(built, hudi015, tmp_path):
    archived = _hudi_archives(hudi015, built.ours, str(tmp_path / "t"), built.ours_model.rows)
    assert ("deltacommit", "COMPLETED") in archived


def test_hudi_archives_our_cleans_rollbacks_and_services(built, hudi015, tmp_path):
    """Hudi's archiver decodes every timeline file it archives (a clean's *inflight* file
    as HoodieCleanerPlan): ours must all be what it expects."""
    archived = _hudi_archives(hudi015, built.ours_unarchived, str(tmp_path / "t"), built.ours_model.rows)
    assert {("clean", "INFLIGHT"), ("clean", "COMPLETED"), ("logcompaction", "REQUESTED"),
            ("compaction", "REQUESTED")} <= archived, sorted(archived)


#: The record our archiver wrote before it wrote Hudi's metadata: the raw timeline files.
LEGACY_ENTRY_SCHEMA = {
    "type": "record", "name": "HoodieArchivedMetaEntry", "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "commitTime", "type": ["null", "string"], "default": None},
        {"name": "actionType", "type": ["null", "string"], "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "actionState", "type": ["null", "string"], "default": None},
        {"name": LEGACY_FILES_FIELD, "type": ["null", {"type": "map", "values": "bytes"}], "default": None},
    ],
}


def _legacy_archive(built: Built, path: str) -> None:
    """Replace the archive of a copy of our table by our former format of the same instants."""
    folder = f"{path}/.hoodie/archived"
    stamps = sorted({r["commitTime"] for recs in _entries(folder).values() for r in recs})
    parsed = fastavro.parse_schema(LEGACY_ENTRY_SCHEMA)
    content = io.BytesIO()
    content.write(struct.pack(">ii", 3, len(stamps)))
    for ts in stamps:
        files = {n: Path(built.ours_timeline, n).read_bytes() for n in os.listdir(built.ours_timeline)
                 if n.split(".")[0] == ts}
        done = next(n for n in files if n.count(".") == 1)
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {"commitTime": ts, "actionType": done.split(".")[1], "version": 1,
                                                 "actionState": "COMPLETED", LEGACY_FILES_FIELD: files})
        content.write(struct.pack(">i", buf.tell()) + buf.getvalue())
    for n in os.listdir(folder):
        os.unlink(os.path.join(folder, n))
    header = {HeaderKey.INSTANT_TIME: stamps[-1], HeaderKey.SCHEMA: json.dumps(LEGACY_ENTRY_SCHEMA)}
    Path(folder, ".commits_.archive.1_1-0-1").write_bytes(encode_block(BlockType.AVRO_DATA, header, content.getvalue()))


def test_our_former_archive_breaks_hudi_and_is_rewritten(built, hudi015, tmp_path):
    path = str(tmp_path / "t")
    shutil.copytree(built.ours, path)
    _legacy_archive(built, path)
    with pytest.raises(HudiOracleError, match="NoSuchElementException"):
        hudi015.read(path, query="incremental", begin="000")
    from streamer.cli import main as cli

    assert cli(["repair", path]) == 0  # `streamer repair` rewrites it (run_archive would too)
    assert upgrade_legacy_archives(Table.open(path)) == []
    assert _keys(hudi015.read(path, query="incremental", begin="000")) == sorted(built.ours_model.rows)
    # the same metadata per (action, state) as our archiver writes today (the former
    # format kept no state transition times)
    def filled(folder: str) -> dict:
        return {k: {tuple(sorted(x for x, v in r.items() if v is not None and x != "stateTransitionTime"))
                    for r in recs} for k, recs in _entries(folder).items()}

    assert filled(f"{path}/.hoodie/archived") == filled(f"{built.ours}/.hoodie/archived")
