"""A folder of JSON, CSV, Parquet or Avro files, read incrementally.

Each batch lists the folder, takes files that are new since the stored
:class:`~sources.position.FileListPosition` (oldest modification time first, at most
``max_files_per_batch``) and reads exactly those files. Hidden (``.x``) and
``_x`` files (``_SUCCESS``, in-progress uploads) are never picked up.

JSON/CSV are read in Spark's PERMISSIVE mode with a corrupt-record column, so a bad
line becomes an error row (file + raw line + reason) instead of failing the batch.
Avro files are decoded with fastavro on the executors (no Spark Avro package needed).
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from sources.base import Batch, empty_errors
from sources.position import FileListPosition, Position
from streamer.config.base import reveal
from streamer.config.sources import FilesSourceConfig
from streamer.errors import SourceError
from streamer.fs import FileStatus, resolve

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CORRUPT_COLUMN = "_corrupt_record"


def select_new_files(
    listing: Iterable[FileStatus], start: FileListPosition, max_files: int, grace_ns: int = 0
) -> tuple[list[FileStatus], FileListPosition]:
    """Pure selection logic: the files to read next and the position after reading them.

    A file is new if its mtime is at/after ``watermark - grace`` and it is not among the
    files remembered at the watermark. Files are taken oldest first (then by path), so
    a cut at ``max_files`` never skips an older file.
    """
    mtimes = {f.path: (f.mtime_ns or 0) for f in listing}
    floor = start.watermark_ns - grace_ns
    done = set(start.files)
    candidates = sorted(
        (f for f in listing if (f.mtime_ns or 0) >= floor and f.path not in done),
        key=lambda f: ((f.mtime_ns or 0), f.path),
    )
    taken = candidates[:max_files]
    if not taken:
        return [], start
    watermark = max(start.watermark_ns, max(f.mtime_ns or 0 for f in taken))
    keep = {p for p in done | {f.path for f in taken} if p in mtimes and mtimes[p] >= watermark - grace_ns}
    return taken, FileListPosition(watermark_ns=watermark, files=tuple(sorted(keep)))


class FilesSource:
    """:class:`~sources.base.Source` over a folder; position = watermark + recent files."""

    source_type = "files"

    def __init__(self, config: FilesSourceConfig) -> None:
        self.config = config
        self._fs, self._root = resolve(config.path)
        self._scheme = config.path.split("://", 1)[0] if "://" in config.path else None

    def initial_position(self) -> FileListPosition:
        return FileListPosition()

    def list_files(self) -> list[FileStatus]:
        """Eligible data files under the folder (hidden/underscore files and folders skipped)."""
        return list(self._eligible(self._root))

    def _eligible(self, folder: str) -> Iterator[FileStatus]:
        for st in self._fs.list_dir(folder):
            if st.name.startswith((".", "_")):
                continue
            if st.is_dir:
                if self.config.recursive:
                    yield from self._eligible(st.path)
            elif self.config.glob is None or fnmatch.fnmatch(st.name, self.config.glob):
                yield st

    def _uri(self, path: str) -> str:
        return f"{self._scheme}://{path}" if self._scheme else path

    def read_batch(self, spark: SparkSession, start: Position | None) -> Batch:
        if start is None:
            start = self.initial_position()
        if not isinstance(start, FileListPosition):
            raise SourceError(f"files source {self.config.path} cannot resume from a {start.kind!r} position")
        grace = int(self.config.late_file_grace.total_seconds() * 1e9)
        taken, end = select_new_files(self.list_files(), start, self.config.max_files_per_batch, grace)
        if not taken:
            empty = spark.createDataFrame([], self.config.schema_ddl or "value STRING")
            return Batch(df=empty, errors=empty_errors(spark), start=start, end=start)
        paths = [self._uri(f.path) for f in taken]
        if self.config.format == "avro":
            df, errors, cached = self._read_avro(spark, paths), empty_errors(spark), ()
        else:
            df, errors, cached = self._read_spark(spark, paths)
        return Batch(df=df, errors=errors, start=start, end=end, cached=cached)

    # -- Spark-native formats -------------------------------------------------------------

    def _read_spark(self, spark: SparkSession, paths: list[str]) -> tuple[DataFrame, DataFrame, tuple]:
        from pyspark.sql import functions as F

        cfg = self.config
        reader = spark.read.format(cfg.format)
        textual = cfg.format in ("json", "csv")
        if textual:
            reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        if cfg.format == "csv":
            reader = reader.option("header", str(cfg.csv_header).lower()).option("sep", cfg.csv_delimiter)
            if cfg.schema_ddl is None:
                reader = reader.option("inferSchema", "true")
        if cfg.schema_ddl is not None:
            ddl = cfg.schema_ddl + (f", {CORRUPT_COLUMN} STRING" if textual else "")
            reader = reader.schema(ddl)
        reader = reader.options(**reveal(cfg.options))
        raw = reader.load(paths)
        if not textual or CORRUPT_COLUMN not in raw.columns:
            return raw, empty_errors(spark), ()
        if cfg.format == "json" and set(raw.columns) == {CORRUPT_COLUMN}:
            return self._all_malformed_json(spark, paths)
        # Spark refuses queries that read only the corrupt-record column from raw files;
        # caching the parsed input once serves both the good and the bad rows.
        raw = raw.withColumn("_source_file", F.col("_metadata.file_path")).cache()
        bad = raw.where(F.col(CORRUPT_COLUMN).isNotNull())
        errors = _error_rows(bad, CORRUPT_COLUMN, f"malformed {self.config.format} record")
        good = raw.where(F.col(CORRUPT_COLUMN).isNull()).drop(CORRUPT_COLUMN, "_source_file")
        return good, errors, (raw,)

    def _all_malformed_json(self, spark: SparkSession, paths: list[str]) -> tuple[DataFrame, DataFrame, tuple]:
        """Files in which no line parses: Spark infers a schema of the corrupt-record column
        alone and then refuses every query of it (UNSUPPORTED_FEATURE.QUERY_ONLY_CORRUPT_RECORD_COLUMN),
        so the run would stop on every retry. Every non-blank line is an error row, with the
        original text, and the batch has no good rows."""
        from pyspark.sql import functions as F

        lines = spark.read.text(paths).withColumn("_source_file", F.col("_metadata.file_path"))
        lines = lines.where(F.length(F.trim(F.col("value"))) > 0).cache()
        errors = _error_rows(lines, "value", "malformed json record (no line of the file parses)")
        return spark.createDataFrame([], "id string").limit(0).drop("id"), errors, (lines,)

    # -- Avro via fastavro on executors ---------------------------------------------------

    def _read_avro(self, spark: SparkSession, paths: list[str]) -> DataFrame:
        import fastavro
        from pyspark.sql.pandas.types import from_arrow_schema

        from sources.avro import avro_to_arrow_schema

        # Reader schema: the newest file's writer schema (older files resolve into it).
        with self._fs.open_input_file(_inside(paths[-1], self._scheme)) as f:
            reader_schema = fastavro.reader(f).writer_schema
        arrow_schema = avro_to_arrow_schema(reader_schema)
        spark_schema = from_arrow_schema(arrow_schema)
        scheme = self._scheme
        config_path = self.config.path

        def decode(batches: Iterator) -> Iterator:
            import fastavro as fa

            from sources.avro import records_to_arrow
            from streamer.fs import resolve as _resolve

            fs, _ = _resolve(config_path)
            for b in batches:
                for p in b.column(0).to_pylist():
                    with fs.open_input_file(_inside(p, scheme)) as fh:
                        records = list(fa.reader(fh, reader_schema=reader_schema))
                    for i in range(0, len(records), 10_000):
                        yield records_to_arrow(records[i : i + 10_000], arrow_schema)

        files = spark.createDataFrame([(p,) for p in paths], "path STRING")
        files = files.repartition(min(len(paths), spark.sparkContext.defaultParallelism))
        return files.mapInArrow(decode, spark_schema)


def _error_rows(bad: DataFrame, payload_column: str, reason: str) -> DataFrame:
    """Error-table rows of a files source: the file is the position, the text the payload."""
    from pyspark.sql import functions as F

    return bad.select(
        F.lit("files").alias("source_type"),
        F.col("_source_file").alias("source_position"),
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        F.lit(None).cast("bigint").alias("offset"),
        F.col("_source_file").alias("file"),
        F.col(payload_column).alias("raw_payload"),
        F.lit("utf-8").alias("payload_encoding"),
        F.lit(reason).alias("reason"),
        F.current_timestamp().alias("error_time"),
    )


def _inside(uri: str, scheme: str | None) -> str:
    return uri.split("://", 1)[1] if scheme else posixpath.normpath(uri)
