"""A plain-dict model of a Hudi table and helpers to compare real reads against it.

Shared by the randomized model test, the crash test and the engine test: the model is
``{(partition, key): row}`` updated with the same rules the writer promises (latest
ordering value wins within a batch; upserts replace; deletes remove). Batches are
generated with ordering values that grow from batch to batch, so event-time and
commit-time merging agree and any reader must return exactly the model.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

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
    import hudi

    table = hudi.HudiTableBuilder.from_base_uri(path).build()
    if read_optimized:
        opts = hudi.HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
        batches = table.read(opts)
    else:
        batches = table.read()
    if not batches:
        return pa.table({c: [] for c in COLUMNS})
    return pa.Table.from_batches(batches)


def read_base_files(path: str) -> pa.Table:
    """The latest committed base file of every file group, read with plain Parquet."""
    from streamer.read.table import Table

    t = Table.open(path)
    tables = []
    for s in t.fsview.latest_base_files():
        with t.fs.open_input_file(s.base_file.path) as f:
            tables.append(pq.read_table(f))
    if not tables:
        return pa.table({c: [] for c in COLUMNS})
    return pa.concat_tables(tables, promote_options="permissive")
