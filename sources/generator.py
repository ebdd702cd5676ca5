"""A deterministic generator of taxi-trip records, for the demo, tests and benchmarks.

Same ``(seed, batch_index)`` → the very same records, so a replayed batch after a
crash is byte-identical and benchmarks compare like with like. Batch 0 inserts
``records_per_batch`` new keys; later batches mix inserts of new keys with updates
and deletes (``_hoodie_is_deleted: true``) of keys inserted by *earlier* batches,
in the configured ratios. A key never occurs twice in one batch, its partition value
never changes, and ``ts`` (the ordering field) grows with every batch so the latest
version of a key always wins. Once ``num_keys`` are used, inserts turn into updates.

Records are built as Arrow (:func:`generate_arrow`, no Spark needed) and handed to
Spark only by :class:`GeneratorSource`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from streamer.config.sources import GeneratorSourceConfig
from streamer.errors import SourceError
from streamer.sources.base import Batch, empty_errors
from streamer.sources.position import GeneratorPosition, Position
from streamer.table import meta_fields

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEY_FIELD = "uuid"
ORDERING_FIELD = "ts"
DELETE_FIELD = meta_fields.IS_DELETED

_CURRENCIES = np.array(["USD", "EUR", "GBP"])


def arrow_schema(config: GeneratorSourceConfig) -> pa.Schema:
    return pa.schema(
        [
            pa.field(KEY_FIELD, pa.string(), nullable=False),
            pa.field(ORDERING_FIELD, pa.int64(), nullable=False),
            pa.field("rider", pa.string()),
            pa.field("driver", pa.string()),
            pa.field("fare", pa.struct([("amount", pa.float64()), ("currency", pa.string())])),
            pa.field("distance_km", pa.float64()),
            pa.field(config.partition_field, pa.string(), nullable=False),
            pa.field(DELETE_FIELD, pa.bool_(), nullable=False),
        ]
    )


def _inserted_before(config: GeneratorSourceConfig, batch_index: int) -> int:
    """Keys inserted by batches ``< batch_index`` (closed form, so any batch is generated alone)."""
    if batch_index == 0:
        return 0
    n = config.records_per_batch
    steady = n - int(n * config.update_ratio) - int(n * config.delete_ratio)
    return min(config.num_keys, n + (batch_index - 1) * steady)


def key_of(index: np.ndarray) -> np.ndarray:
    """Record keys for key indices (``trip-0000000042``)."""
    return np.char.mod("trip-%010d", index)


def generate_arrow(config: GeneratorSourceConfig, batch_index: int) -> pa.Table:
    """The records of one batch as an Arrow table (see the module docstring for the rules)."""
    if batch_index < 0:
        raise SourceError(f"generator batch_index must be >= 0, got {batch_index}")
    n = config.records_per_batch
    rng = np.random.default_rng(np.random.SeedSequence([config.seed & (2**63 - 1), batch_index]))
    pool = _inserted_before(config, batch_index)
    if pool == 0:
        n_upd = n_del = 0
    else:
        n_upd, n_del = int(n * config.update_ratio), int(n * config.delete_ratio)
    n_ins = max(0, min(n - n_upd - n_del, config.num_keys - pool))
    # Inserts short of key space become updates; nothing can exceed the existing pool.
    n_upd = min(n - n_ins - n_del, pool - min(n_del, pool))
    n_del = min(n_del, pool)

    new_keys = np.arange(pool, pool + n_ins, dtype=np.int64)
    old_keys = rng.choice(pool, size=n_upd + n_del, replace=False).astype(np.int64) if pool else np.empty(0, np.int64)
    keys = np.concatenate([new_keys, old_keys])
    deleted = np.concatenate([np.zeros(n_ins + n_upd, bool), np.ones(n_del, bool)])
    order = rng.permutation(len(keys))
    keys, deleted = keys[order], deleted[order]
    m = len(keys)

    interval_ms = int(config.batch_interval.total_seconds() * 1000)
    ts = config.start_ts_ms + batch_index * max(interval_ms, n) + np.arange(m, dtype=np.int64)
    partitions = np.array(config.partitions)
    amount = np.round(rng.uniform(5.0, 120.0, m), 2)
    fare = pa.StructArray.from_arrays(
        [pa.array(amount), pa.array(_CURRENCIES[rng.integers(0, len(_CURRENCIES), m)])],
        names=["amount", "currency"],
    )
    columns = [
        pa.array(key_of(keys)),
        pa.array(ts),
        pa.array(np.char.mod("rider-%03d", rng.integers(0, 1000, m))),
        pa.array(np.char.mod("driver-%03d", rng.integers(0, 1000, m))),
        fare,
        pa.array(np.round(rng.exponential(8.0, m), 3)),
        pa.array(partitions[keys % len(partitions)]),
        pa.array(deleted),
    ]
    return pa.Table.from_arrays(columns, schema=arrow_schema(config))


class GeneratorSource:
    """:class:`~streamer.sources.base.Source` over :func:`generate_arrow`; position = next batch index."""

    source_type = "generator"

    def __init__(self, config: GeneratorSourceConfig) -> None:
        self.config = config

    def initial_position(self) -> GeneratorPosition:
        return GeneratorPosition(batch_index=0)

    def _index(self, start: Position | None) -> int:
        if start is None:
            return 0
        if not isinstance(start, GeneratorPosition):
            raise SourceError(f"generator source cannot resume from a {start.kind!r} position")
        return start.batch_index

    def exhausted(self, start: Position | None) -> bool:
        limit = self.config.num_batches
        return limit is not None and self._index(start) >= limit

    def read_arrow(self, start: Position | None) -> tuple[pa.Table, GeneratorPosition]:
        """One batch without Spark (local engine, benchmarks); empty once ``num_batches`` are done."""
        index = self._index(start)
        if self.exhausted(start):
            return arrow_schema(self.config).empty_table(), GeneratorPosition(batch_index=index)
        return generate_arrow(self.config, index), GeneratorPosition(batch_index=index + 1)

    def available_now(self, start: Position | None) -> int:
        """Batches available now: up to ``num_batches``; an endless generator has one."""
        limit = self.config.num_batches
        return limit if limit is not None else self._index(start) + 1

    def read_batch_until(self, spark: SparkSession, start: Position | None, bound: object) -> Batch:
        """:meth:`read_batch`, or an empty batch once batch ``bound`` is reached."""
        assert isinstance(bound, int)
        if self._index(start) >= bound:
            index = GeneratorPosition(batch_index=self._index(start))
            empty = spark.createDataFrame(arrow_schema(self.config).empty_table())
            return Batch(df=empty, errors=empty_errors(spark), start=start or index, end=index)
        return self.read_batch(spark, start)

    def read_batch(self, spark: SparkSession, start: Position | None) -> Batch:
        table, end = self.read_arrow(start)
        df = spark.createDataFrame(table)
        return Batch(df=df, errors=empty_errors(spark), start=start, end=end)
