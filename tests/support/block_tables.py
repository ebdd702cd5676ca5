"""Tables with many small log blocks, and a dict model of what they must read back as.

Every batch gets ordering values greater than all before it, so event-time order and
write order agree: any correct reader - ours or hudi-rs - must return exactly the model.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from streamer.read import Table
from streamer.write import HudiWriter, TableConfig, WriteOptions
from tests.support.readers import hudi_rs_table

COLUMNS = ["id", "city", "ts", "value"]
CITIES = ["sf", "nyc", "oslo"]
SMALL = WriteOptions(small_file_limit=20_000, max_file_size=40_000, default_record_size=100,
                     slice_bloom_num_entries=500, engine="local")
SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("value", pa.string())])


@dataclass
class Model:
    rows: dict[tuple[str, int], dict] = field(default_factory=dict)

    def apply(self, upserts: pa.Table | None = None, deletes: pa.Table | None = None) -> None:
        for r in (upserts.to_pylist() if upserts is not None else []):
            self.rows[(r["city"], r["id"])] = {c: r[c] for c in COLUMNS}
        for r in (deletes.to_pylist() if deletes is not None else []):
            self.rows.pop((r["city"], r["id"]), None)

    def snapshot(self) -> list[dict]:
        return sorted(self.rows.values(), key=lambda r: (r["city"], r["id"]))


@dataclass
class Gen:
    """Seeded batches over a small key space, so most rows are updates."""

    seed: int = 0
    key_space: int = 60
    ts: int = 0
    pad: int = 0  # extra random characters per value (bigger, barely compressible rows)
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def upserts(self, n: int, tag: str = "") -> pa.Table:
        rows = {}
        for _ in range(n):
            self.ts += 1
            k = (self.rng.choice(CITIES), self.rng.randrange(self.key_space))
            extra = "".join(self.rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=self.pad)) if self.pad else ""
            rows[k] = {"id": k[1], "city": k[0], "ts": self.ts, "value": f"v{self.ts}{tag}{extra}"}
        return pa.Table.from_pylist(list(rows.values()), schema=SCHEMA)

    def deletes(self, model: Model, n: int) -> pa.Table:
        keys = sorted(model.rows)
        picked = self.rng.sample(keys, min(n, len(keys)))
        self.ts += 1
        rows = [{"id": k[1], "city": k[0], "ts": self.ts, "value": None} for k in picked]
        return pa.Table.from_pylist(rows, schema=SCHEMA)


#: The table version new test tables are created at (see :func:`at_version`).
_VERSION: contextvars.ContextVar[int] = contextvars.ContextVar("table_version", default=6)


@contextlib.contextmanager
def at_version(version: int) -> Iterator[None]:
    """Tables the builders create inside are of table ``version``: the Hudi tier builds
    every kind of table at 6, 8 and 9 with the same builders."""
    token = _VERSION.set(version)
    try:
        yield
    finally:
        _VERSION.reset(token)


def versioned(cfg: TableConfig) -> TableConfig:
    """``cfg`` at the table version of the enclosing :func:`at_version` (6 outside)."""
    return cfg.with_changes(table_version=_VERSION.get())


def create(path: str, block_format: str = "parquet") -> HudiWriter:
    cfg = versioned(TableConfig("svc", ("id",), ("city",), "ts", log_block_format=block_format))
    return HudiWriter.create(path, cfg, schema=SCHEMA, options=SMALL)


def open_writer(path: str) -> HudiWriter:
    return HudiWriter.open(path, options=SMALL)


def build(path: str, commits: int, *, seed: int = 0, rows: int = 12, deletes_every: int = 4,
          block_format: str = "parquet", key_space: int = 60, pad: int = 0) -> tuple[HudiWriter, Gen, Model]:
    """A table whose groups collect one small block per commit (plus some delete blocks)."""
    w = create(path, block_format)
    gen, model = Gen(seed, key_space=key_space, pad=pad), Model()
    first = gen.upserts(120)
    w.upsert(first)
    model.apply(first)
    for i in range(commits):
        step(w, gen, model, rows, delete=(deletes_every and i % deletes_every == deletes_every - 1))
    return w, gen, model


def step(w: HudiWriter, gen: Gen, model: Model, rows: int = 12, delete: bool = False) -> str:
    if delete:
        d = gen.deletes(model, max(1, rows // 3))
        res = w.delete(d)
        model.apply(deletes=d)
    else:
        u = gen.upserts(rows)
        res = w.upsert(u)
        model.apply(u)
    return res.instant


def canon(table: pa.Table) -> list[dict]:
    return sorted(table.select(COLUMNS).to_pylist(), key=lambda r: (r["city"], r["id"]))


def digest(rows: list[dict]) -> str:
    """A stable hash of canonical rows (a model snapshot or a read), cheap to log and compare."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def read_ours(path: str) -> list[dict]:
    return canon(Table.open(path).read())


def read_hudi_rs(path: str) -> list[dict]:
    table = hudi_rs_table(path)
    return canon(table) if table is not None else []


def log_block_counts(path: str) -> dict[tuple[str, str], int]:
    """Effective data/delete blocks per latest merged slice, as our reader applies them."""
    from streamer.services.slices import effective_units, read_slice_blocks

    t = Table.open(path)
    done = t.timeline.completed_timestamps()
    out = {}
    for s in t.fsview.latest_merged_slices():
        units, _ = effective_units(read_slice_blocks(t.fs, s), done)
        out[(s.partition_path, s.file_id)] = sum(len(u.blocks) for u in units)
    return out


def unit_counts(path: str) -> dict[tuple[str, str], int]:
    from streamer.services.slices import effective_units, read_slice_blocks

    t = Table.open(path)
    done = t.timeline.completed_timestamps()
    out = {}
    for s in t.fsview.latest_file_slices():
        units, _ = effective_units(read_slice_blocks(t.fs, s), done)
        out[(s.partition_path, s.file_id)] = len(units)
    return out


def max_block_sizes(path: str) -> dict[tuple[str, str], int]:
    from streamer.services.slices import effective_units, read_slice_blocks

    t = Table.open(path)
    done = t.timeline.completed_timestamps()
    out = {}
    for s in t.fsview.latest_file_slices():
        units, _ = effective_units(read_slice_blocks(t.fs, s), done)
        out[(s.partition_path, s.file_id)] = max((u.max_block_size for u in units), default=0)
    return out
