"""Where the write's per-batch and per-file-group work runs: ``local`` or ``spark``.

``auto`` picks local for Arrow input and for Spark DataFrames up to
``WriteOptions.auto_local_max_rows`` rows (collecting a small micro-batch to the
driver is cheaper than scheduling it), and Spark above that. A caller that already
knows the batch's size (the pipeline decided with the same threshold when it built the
batch) names the engine instead, and no row count runs here.
"""

from __future__ import annotations

from typing import Any

from streamer import defaults
from streamer.data import is_spark_dataframe
from streamer.write.engine.base import Engine, Prepared
from streamer.write.engine.local import LocalEngine

_is_spark_df = is_spark_dataframe


def _choose(name: str, data: Any, options: Any) -> Engine:
    parallelism = getattr(options, "parallelism", defaults.LOCAL_THREADS)
    if name == "local":
        return LocalEngine(parallelism)
    if name == "spark":
        from streamer.write.engine.spark import SparkEngine

        return SparkEngine()
    if name != "auto":
        raise ValueError(f"engine must be auto, local or spark, not {name!r}")
    if _is_spark_df(data):
        limit = getattr(options, "auto_local_max_rows", defaults.LOCAL_MAX_ROWS)
        if data.limit(limit + 1).count() > limit:
            from streamer.write.engine.spark import SparkEngine

            return SparkEngine()
    return LocalEngine(parallelism)


def select_engine(name: str, data: Any, options: Any) -> Engine:
    """The engine ``name`` (``auto``: decided from ``data``) writing with ``options``."""
    return _choose(name, data, options)


__all__ = ["Engine", "LocalEngine", "Prepared", "select_engine"]
