"""One source batch → (rows for the table, rows for the error table, counts), in few Spark jobs.

Why this is its own step: on a small machine every Spark job costs a few hundred
milliseconds whatever its size, and freshness is the sum of them. A batch small
enough for the driver is therefore collected **once** as Arrow (transformed rows with
an "is it keyable" flag) and split there; counting, splitting and the error rows cost
no further jobs. Larger batches stay distributed (cached once) for the Spark engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from sources.base import Batch
from sources.position import KafkaOffsets
from streamer.config.pipeline import PipelineConfig
from streamer.pipeline.errors_table import (
    ERROR_ARROW_SCHEMA,
    KAFKA_META,
    PAYLOAD_COL,
    REASON_COL,
    as_error_arrow,
    flag_unkeyable,
    unkeyable_error_rows,
)
from transforms import apply_transforms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class PreparedBatch:
    """What a batch commits: ``good`` (Arrow, or a Spark DataFrame for the Spark engine) and ``errors``."""

    good: Any
    errors: pa.Table
    read: int
    written: int
    _cached: list[DataFrame] = field(default_factory=list)

    @property
    def errored(self) -> int:
        return self.errors.num_rows

    @property
    def filtered(self) -> int:
        return self.read - self.written - self.errored

    def release(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached.clear()


def estimated_rows(batch: Batch) -> int | None:
    """An upper bound on the batch's records known without a Spark job (Kafka offsets), else None."""
    if isinstance(batch.start, KafkaOffsets) and isinstance(batch.end, KafkaOffsets):
        return batch.start.records_until(batch.end)
    return None


def on_driver(config: PipelineConfig, batch: Batch) -> bool:
    """Whether the batch is collected to the driver (local engine) or written by Spark."""
    engine = config.engine
    if engine.mode != "auto":
        return engine.mode == "local"
    estimate = estimated_rows(batch)
    if estimate is None:
        estimate = batch.df.limit(engine.local_max_records + 1).count()
    return estimate <= engine.local_max_records


def prepare(
    config: PipelineConfig,
    spark: SparkSession,
    batch: Batch,
    source_type: str,
    position_json: str,
    hidden_columns: tuple[str, ...] = (),
) -> PreparedBatch:
    """Transform, flag unkeyable rows, split good from bad, count.

    ``hidden_columns`` are columns the runner added for itself (Kafka metadata used to
    identify bad records); they are dropped from the rows that reach the table.
    """
    transformed = apply_transforms(batch.df, config.transforms, spark)
    flagged = flag_unkeyable(transformed, config.target)
    source_errors = as_error_arrow(batch.errors.toArrow())
    drop = [REASON_COL, PAYLOAD_COL, *[c for c in hidden_columns if c in flagged.columns]]
    cached: list[DataFrame] = []
    if on_driver(config, batch):
        rows = flagged.toArrow()
        good_mask = pc.is_null(rows.column(REASON_COL))
        good: Any = rows.filter(good_mask).drop_columns(drop)
        bad = rows.filter(pc.invert(good_mask))
        n_written, n_flagged = good.num_rows, rows.num_rows
    else:
        from pyspark.sql import functions as F

        flagged = flagged.persist()
        cached.append(flagged)
        good = flagged.where(F.col(REASON_COL).isNull()).drop(*drop)
        bad = flagged.where(F.col(REASON_COL).isNotNull()).toArrow()
        n_written = good.count()
        n_flagged = n_written + bad.num_rows
    n_good_in = batch.df.count() if config.transforms else n_flagged
    unkeyable = unkeyable_error_rows(bad, source_type, position_json)
    errors = pa.concat_tables([source_errors, unkeyable]) if unkeyable.num_rows else source_errors
    return PreparedBatch(
        good=good,
        errors=errors.cast(ERROR_ARROW_SCHEMA),
        read=n_good_in + source_errors.num_rows,
        written=n_written,
        _cached=cached,
    )


def hidden_kafka_columns(config: PipelineConfig) -> tuple[str, ...]:
    """Kafka metadata the runner asks the source for although the YAML did not."""
    src = config.source
    if src.type == "kafka" and not src.include_metadata:
        return KAFKA_META
    return ()
