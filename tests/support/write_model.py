"""A plain-dict model of a Hudi table and helpers to compare real reads against it.

Shared by the randomized model test, the crash test and the engine test: the model is
``{(partition, key): row}`` updated with the same rules the writer promises (latest
ordering value wins within a batch; upserts replace; deletes remove). Batches are
generated with ordering values that grow from batch to batch, so event-time and
commit-time merging agree and any reader must return exactly the model.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from tests.support.readers import hudi_rs_table

COLUMNS = ["id", "city", "ts", "value", "amount"]
CITIES = ["sf", "nyc", "chennai", "oslo"]


@dataclass
class Model:
    rows: dict[tuple[str, int], dict] = field(default_factory=dict)

    def upsert(self, batch: pa.Table) -> None:
        latest: dict[tuple[str, int], dict] = {}
        for r in batch.to_pylist():
            k = (r["city"], r["id"])
            if k not in latest or r["ts"] >= latest[k]["ts"]:
                latest[k] = r
        for k, r in latest.items():
            if r.get("_hoodie_is_deleted"):
                self.rows.pop(k, None)
            else:
                self.rows[k] = {c: r.get(c) for c in COLUMNS}

    def insert(self, batch: pa.Table) -> None:
        self.upsert(batch)

    def delete(self, keys: pa.Table) -> None:
        for r in keys.to_pylist():
            self.rows.pop((r["city"], r["id"]), None)

    def snapshot(self) -> list[dict]:
        return sorted(self.rows.values(), key=lambda r: (r["city"], r["id"]))


def canon(table: pa.Table) -> list[dict]:
    cols = [c for c in COLUMNS if c in table.column_names]
    return sorted(table.select(cols).to_pylist(), key=lambda r: (r["city"], r["id"], r["ts"], r["value"]))


@dataclass
class BatchGen:
    """Seeded generator of upsert/insert/delete batches over a bounded key space."""

    seed: int
    key_space: int = 400
    batch: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def _rows(self, ids: list[int], with_deletes: bool) -> pa.Table:
        self.batch += 1
        r = self.rng
        base_ts = self.batch * 1000
        rows = {
            "id": ids,
            "city": [CITIES[i % len(CITIES)] for i in ids],
            "ts": [base_ts + r.randrange(500) for _ in ids],
            "value": [f"v{self.batch}-{r.randrange(10**6)}" for _ in ids],
            "amount": [r.random() * 100 for _ in ids],
        }
        t = pa.table(rows)
        if with_deletes:
            flags = [r.random() < 0.15 for _ in ids]
            t = t.append_column("_hoodie_is_deleted", pa.array(flags))
        return t

    def upsert_batch(self, model: Model, n: int) -> pa.Table:
        existing = [k[1] for k in model.rows]
        ids = []
        for _ in range(n):
            if existing and self.rng.random() < 0.4:
                ids.append(self.rng.choice(existing))
            else:
                ids.append(self.rng.randrange(self.key_space))
        # in-batch duplicates exercise combining
        ids += [self.rng.choice(ids) for _ in range(max(1, n // 10))]
        return self._rows(ids, with_deletes=self.rng.random() < 0.5)

    def insert_batch(self, model: Model, n: int) -> pa.Table:
        fresh = [i for i in range(self.key_space, self.key_space * 3) if (CITIES[i % 4], i) not in model.rows]
        ids = self.rng.sample(fresh, min(n, len(fresh)))
        return self._rows(ids, with_deletes=False)

    def delete_batch(self, model: Model, n: int) -> pa.Table:
        keys = list(model.rows)
        chosen = self.rng.sample(keys, min(n, len(keys)))
        ids = [k[1] for k in chosen] + [self.key_space * 5 + 1]  # plus one unknown key
        return pa.table({"id": ids, "city": [CITIES[i % len(CITIES)] for i in ids]})


def read_ours(path: str, query: str = "snapshot") -> pa.Table:
    from streamer.read.table import Table

    return Table.open(path).read(query=query)


def read_hudi_rs(path: str, read_optimized: bool = False) -> pa.Table:
    """hudi-rs's read, the model's columns when the table has no rows."""
    table = hudi_rs_table(path, read_optimized=read_optimized)
    return pa.table({c: [] for c in COLUMNS}) if table is None else table


_BASE = re.compile(r"^(?P<fid>.+)_(?P<token>[^_]+)_(?P<instant>\d{14,17})\.parquet$")
#: A completed write: ``<instant>.<action>`` (table version 6), or
#: ``<instant>_<completion time>.<action>`` in ``.hoodie/timeline`` (versions 8 and 9).
_DONE = re.compile(r"^(?P<instant>\d{14,17})(_\d{14,17})?\.(?P<action>commit|deltacommit|replacecommit)$")
_ANY = re.compile(r"^(?P<instant>\d{14,17})\.")


def latest_base_files(path: str) -> list[str]:
    """Every file group's newest base file of a completed instant, found by listing the
    folders and ``.hoodie`` (no file-system view of ours): what a read-optimized query
    reads. An instant older than the whole active timeline counts as completed (archived)."""
    timeline = os.path.join(path, ".hoodie", "timeline")  # table version 8+: its own folder
    names = os.listdir(timeline if os.path.isdir(timeline) else os.path.join(path, ".hoodie"))
    done = {m["instant"] for n in names if (m := _DONE.match(n))}
    active = [m["instant"] for n in names if (m := _ANY.match(n))]
    oldest_active = min(active) if active else ""
    newest: dict[tuple[str, str], tuple[str, str]] = {}
    for folder, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for f in files:
            m = _BASE.match(f)
            if m is None:
                continue
            inst = m["instant"]
            if inst not in done and inst >= oldest_active:
                continue
            gid = (folder, m["fid"])
            if gid not in newest or inst > newest[gid][0]:
                newest[gid] = (inst, os.path.join(folder, f))
    return sorted(f for _, f in newest.values())


def read_base_files(path: str) -> pa.Table:
    """The latest committed base file of every file group (:func:`latest_base_files`),
    read with plain Parquet."""
    tables = [pq.read_table(f) for f in latest_base_files(path)]
    if not tables:
        return pa.table({c: [] for c in COLUMNS})
    return pa.concat_tables(tables, promote_options="permissive")


# --- a history model: what every query of a table must answer ------------------------
@dataclass
class KeySpec:
    """How Hudi derives ``_hoodie_record_key`` and ``_hoodie_partition_path`` from a row
    (simple, complex, non-partitioned and timestamp key generators, as ``TableConfig``)."""

    record_key: tuple[str, ...] = ("id",)
    partition: tuple[str, ...] = ("city",)
    keygen: str = "simple"
    hive: bool = False
    timestamp_format: str = "%Y/%m/%d"

    def key(self, row: dict) -> str:
        if self.keygen == "complex" or len(self.record_key) > 1:
            return ",".join(f"{f}:{row[f]}" for f in self.record_key)
        return str(row[self.record_key[0]])

    def partition_path(self, row: dict) -> str:
        if self.keygen == "non_partitioned" or not self.partition:
            return ""
        parts = []
        for f in self.partition:
            v = row[f]
            if self.keygen == "timestamp":
                import datetime as dt

                v = dt.datetime.fromtimestamp(v / 1000, dt.timezone.utc).strftime(self.timestamp_format)
            parts.append(f"{f}={v}" if self.hive else str(v))
        return "/".join(parts)


META = ("_hoodie_commit_time", "_hoodie_record_key", "_hoodie_partition_path")
IS_DELETED = "_hoodie_is_deleted"


@dataclass
class History:
    """The expected table after every commit, built only from the data written.

    Rows are keyed by (partition path, record key) and carry the instant that last wrote
    them as ``_hoodie_commit_time``. Merging is Hudi's event-time rule for a table with an
    ordering field (``DefaultHoodieRecordPayload``): within a batch the largest ordering
    value wins; a later write (or delete) whose ordering value is *smaller* than the
    stored row's loses; ``_hoodie_is_deleted: true`` deletes. Without an ordering field
    the latest write wins. From the recorded commits it answers, without any reader:

    * snapshot and time travel: the commits up to the instant, merged;
    * incremental ``(begin, end]``: what was *written* in the range - the range's commits
      merged among themselves, not with earlier ones (Hudi's MOR incremental relation
      reads only the files the range wrote: a late event that lost to an earlier row is
      still part of the range's output);
    * the columns of each answer: those written up to that instant (a column added later
      is absent from an earlier time travel).
    """

    keys: KeySpec = field(default_factory=KeySpec)
    ordering: str | None = "ts"
    #: (instant, "upsert" | "delete", rows, data columns known after it), commit order
    commits: list[tuple[str, str, list[dict], list[str]]] = field(default_factory=list)

    # -- recording -----------------------------------------------------------------------
    def _columns_with(self, batch: pa.Table) -> list[str]:
        cols = list(self.commits[-1][3]) if self.commits else []
        for c in batch.column_names:
            if c not in cols and c != IS_DELETED and not c.startswith("_hoodie_"):
                cols.append(c)
        return cols

    def upsert(self, instant: str, batch: pa.Table) -> None:
        self.commits.append((instant, "upsert", batch.to_pylist(), self._columns_with(batch)))

    def delete(self, instant: str, keys: pa.Table) -> None:
        cols = list(self.commits[-1][3]) if self.commits else []
        self.commits.append((instant, "delete", keys.to_pylist(), cols))

    # -- merging -------------------------------------------------------------------------
    def _older(self, have: dict | None, new: dict) -> bool:
        """True when ``new`` loses against the stored row ``have`` (event time)."""
        if have is None or self.ordering is None or new.get(self.ordering) is None:
            return False
        return have[self.ordering] > new[self.ordering]

    def _key(self, r: dict) -> tuple[str, str]:
        return (self.keys.partition_path(r), self.keys.key(r))

    def _replay(self, commits) -> dict[tuple[str, str], dict]:
        state: dict[tuple[str, str], dict] = {}
        for instant, op, rows, _ in commits:
            if op == "delete":
                for r in rows:
                    k = self._key(r)
                    if not self._older(state.get(k), r):
                        state.pop(k, None)
                continue
            latest: dict[tuple[str, str], dict] = {}
            for r in rows:
                k = self._key(r)
                if k not in latest or not self._older(latest[k], r):
                    latest[k] = r
            for k, r in latest.items():
                if self._older(state.get(k), r):
                    continue
                if r.get(IS_DELETED):
                    state.pop(k, None)
                else:
                    state[k] = {**r, "_hoodie_commit_time": instant, "_hoodie_record_key": k[1],
                                "_hoodie_partition_path": k[0]}
        return state

    def _answer(self, commits) -> list[dict]:
        cols = self.columns_at(commits[-1][0]) if commits else []
        return [{c: r.get(c) for c in cols} for r in self._replay(commits).values()]

    # -- answers -------------------------------------------------------------------------
    @property
    def columns(self) -> list[str]:
        """Data columns and meta columns of the latest answer."""
        return self.columns_at(self.commits[-1][0]) if self.commits else list(META)

    def columns_at(self, instant: str) -> list[str]:
        known: list[str] = []
        for at, _, _, cols in self.commits:
            if at <= instant:
                known = cols
        return list(known) + list(META)

    def snapshot(self) -> list[dict]:
        return self._answer(self.commits)

    def as_of(self, instant: str) -> list[dict]:
        return self._answer([c for c in self.commits if c[0] <= instant])

    def incremental(self, begin: str, end: str) -> list[dict]:
        rows = self._answer([c for c in self.commits if begin < c[0] <= end])
        cols = self.columns_at(end)
        return [{c: r.get(c) for c in cols} for r in rows]

    @property
    def instants(self) -> list[str]:
        return [c[0] for c in self.commits]
