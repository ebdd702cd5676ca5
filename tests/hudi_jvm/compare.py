"""Reading one table through every reader and comparing rows, typed values included.

Readers: ours (:class:`streamer.read.Table`), hudi-rs (the ``hudi`` package) and
Apache Hudi 0.15 / 1.0 (Spark, through :mod:`streamer.testing.hudi`). Rows are put in
a canonical form: writer-dependent meta columns dropped (``_hoodie_commit_seqno``,
``_hoodie_file_name``), timestamps as naive UTC, rows sorted, so only what a query
means is compared.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from streamer.errors import StreamerError
from streamer.read import Table
from streamer.testing.hudi import HudiOracleError, HudiSpark

DROPPED = ("_hoodie_commit_seqno", "_hoodie_file_name")
QUERIES = ("snapshot", "read_optimized", "incremental", "time_travel")


@dataclass(frozen=True)
class Query:
    """One query of a table; ``begin`` exclusive and ``end``/``as_of`` inclusive, as Hudi."""

    kind: str
    begin: str | None = None
    end: str | None = None
    as_of: str | None = None

    def label(self) -> str:
        if self.kind == "incremental":
            return f"incremental ({self.begin}, {self.end}]"
        if self.kind == "time_travel":
            return f"time travel as of {self.as_of}"
        return self.kind


def _norm(v):
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat()
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_norm(x) for x in v]
    if isinstance(v, float) and v != v:
        return "NaN"
    return v


def canon(table: pa.Table, columns: Sequence[str] | None = None) -> list[str]:
    """Rows as sorted canonical JSON lines over ``columns`` (default: all but dropped)."""
    cols = [c for c in (columns or table.column_names) if c not in DROPPED]
    missing = [c for c in cols if c not in table.column_names]
    if missing:
        raise AssertionError(f"columns {missing} missing from {table.column_names}")
    rows = table.select(cols).to_pylist()
    return sorted(json.dumps(_norm(r), sort_keys=True, default=str) for r in rows)


def read_ours(path: str, q: Query) -> pa.Table:
    t = Table.open(path)
    if q.kind == "incremental":
        return t.read("incremental", begin=q.begin, end=q.end)
    if q.kind == "time_travel":
        return t.read(as_of=q.as_of)
    return t.read(q.kind)


def read_hudi_rs(path: str, q: Query) -> pa.Table:
    import hudi

    table = hudi.HudiTableBuilder.from_base_uri(path).build()
    opts = hudi.HudiReadOptions()
    if q.kind == "read_optimized":
        opts = opts.with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    elif q.kind == "incremental":
        opts = (opts.with_query_type(hudi.HudiQueryType.Incremental)
                .with_start_timestamp(q.begin).with_end_timestamp(q.end))
    elif q.kind == "time_travel":
        opts = opts.with_as_of_timestamp(q.as_of)
    batches = table.read(opts)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def hudi_requests(session: HudiSpark, path: str, queries: Sequence[Query], options=None) -> list:
    return [
        session.read_request(path, query=q.kind, begin=q.begin, end=q.end, as_of=q.as_of,
                             options=options)
        for q in queries
    ]


def standard_queries(path: str) -> list[Query]:
    """Snapshot, read-optimized, an incremental range and a time travel point."""
    writes = [i.timestamp for i in Table.open(path).timeline.completed_writes()]
    assert writes, f"{path} has no completed write"
    mid = writes[len(writes) // 2]
    before_mid = writes[len(writes) // 2 - 1] if len(writes) > 1 else "000"
    queries = [
        Query("snapshot"),
        Query("read_optimized"),
        Query("incremental", begin=before_mid, end=writes[-1]),
        Query("time_travel", as_of=mid),
    ]
    if len(writes) > 2 and writes[-2] != mid:
        queries.append(Query("time_travel", as_of=writes[-2]))
    return queries


def assert_all_readers_agree(path: str, sessions: dict[str, HudiSpark],
                             queries: Sequence[Query] | None = None, *, hudi_rs: bool = True,
                             hudi_rs_skip: Sequence[str] = (), expected_snapshot=None,
                             hudi_options=None, ignore: Sequence[str] = ()) -> dict[str, list[str]]:
    """Every query through every reader equals our reader's answer; returns ours.

    ``expected_snapshot``: canonical rows the snapshot must also equal (a model).
    ``hudi_rs_skip``: query kinds hudi-rs is not asked (a documented hudi-rs gap).
    ``ignore``: columns left out of the comparison (a documented Hudi behaviour).
    A query our reader refuses must be refused by Hudi too.
    """
    queries = list(queries or standard_queries(path))
    answers: dict[str, list[str]] = {}
    failures: list[str] = []
    ours: dict[Query, pa.Table] = {}
    refused: dict[Query, str] = {}
    for q in queries:
        try:
            ours[q] = read_ours(path, q)
        except StreamerError as e:  # e.g. time travel to a cleaned instant: Hudi refuses too
            refused[q] = str(e)
            continue
        answers[q.label()] = canon(ours[q], _keep(ours[q].column_names, ignore))
    assert any(q.kind == "snapshot" for q in ours), f"our reader refused every query: {refused}"
    if expected_snapshot is not None:
        snap = next(q for q in queries if q.kind == "snapshot")
        if answers[snap.label()] != expected_snapshot:
            failures.append(f"our reader's snapshot differs from the model ({len(answers[snap.label()])} vs {len(expected_snapshot)} rows)")
    for version, session in sessions.items():
        results = session.read_many(hudi_requests(session, path, queries, hudi_options))
        for q, got in zip(queries, results, strict=True):
            if q in refused:
                if not isinstance(got, HudiOracleError):
                    failures.append(f"Hudi {version} answers {q.label()} ({got.num_rows} rows) "
                                    f"but our reader refused it: {refused[q]}")
                continue
            if isinstance(got, HudiOracleError):
                failures.append(f"Hudi {version} {q.label()}: {got}")
                continue
            rows = canon(got, _keep(ours[q].column_names, ignore))
            if rows != answers[q.label()]:
                failures.append(_diff(f"Hudi {version} {q.label()}", answers[q.label()], rows))
    if hudi_rs:
        for q in queries:
            if q.kind in hudi_rs_skip or q in refused:
                continue
            got = read_hudi_rs(path, q)
            if got.num_rows == 0 and not answers[q.label()]:
                continue
            rows = canon(got, _keep(ours[q].column_names, ignore))
            if rows != answers[q.label()]:
                failures.append(_diff(f"hudi-rs {q.label()}", answers[q.label()], rows))
    assert not failures, f"{path}:\n" + "\n".join(failures)
    return answers


def _keep(columns: Sequence[str], ignore: Sequence[str]) -> list[str]:
    return [c for c in columns if c not in DROPPED and c not in ignore]


def _diff(what: str, ours: list[str], theirs: list[str]) -> str:
    a, b = set(ours), set(theirs)
    only_ours = sorted(a - b)[:3]
    only_theirs = sorted(b - a)[:3]
    return (f"{what}: {len(theirs)} rows vs our {len(ours)}; only ours: {only_ours}; "
            f"only theirs: {only_theirs}")
