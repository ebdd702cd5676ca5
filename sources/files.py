"""A folder of JSON, CSV, Parquet or Avro files, read incrementally.

Each batch lists the folder, takes files that are new since the stored
:class:`~streamer.sources.position.FileListPosition` (oldest modification time first, at most
``max_files_per_batch``) and reads exactly those files. Hidden (``.x``) and
``_x`` files (``_SUCCESS``, in-progress uploads) are never picked up.

JSON Lines and CSV are split into lines on the executors (``streamer.sources.lines``) and parsed
with Spark's ``from_json``/``from_csv``, so no bad record fails the batch: each becomes
one error row under its own position (``file:line``), with its original bytes (base64
when they are not UTF-8) and a reason naming what is wrong (malformed text, the field
whose value does not fit its type, a CSV row with missing or extra columns, a line over
``max_record_bytes``). The schema is the declared one, else inferred over the batch;
the pipeline then prefers the target table's types (``Batch.retype``), so one odd value
cannot change a column's type. ``options: {multiLine: true}`` keeps Spark's own reader.
Avro files are decoded with fastavro on the executors (no Spark Avro package needed).
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from streamer.config.base import reveal
from streamer.config.sources import FilesSourceConfig
from streamer.errors import SourceError, first_line
from streamer.fs import FileStatus, resolve
from streamer.sources.base import (
    ERROR_COLUMNS,
    RECORD_COLUMN,
    Batch,
    empty_errors,
    struct_from_ddl,
    unstamped_error_time,
)
from streamer.sources.lines import LINE_DDL
from streamer.sources.position import FileListPosition, Position

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

CORRUPT_COLUMN = "_corrupt_record"
#: A record whose JSON object is followed by more than white space.
TEXT_AFTER_JSON = ("text after the record's JSON object (a second object?): a record holds one JSON "
                   "object, and the rest would be lost")
#: After a closing brace or bracket, JSON has white space then ``,``, ``}``, ``]`` or the end.
_NOT_AFTER_CLOSE = r"[}\]]\s*[^\s,}\]]"
#: Bytes of an oversized record kept in the error table (the file and line say where the rest is).
OVERSIZED_KEEP = 64 * 1024


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
    """:class:`~streamer.sources.base.Source` over a folder; position = watermark + recent files."""

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
        return self._read_from(spark, start, self.list_files())

    def warm_up_batch(self, spark: SparkSession, start: Position | None) -> Batch:
        """One file after ``start``, else the first file of the folder."""
        one = FilesSource(self.config.model_copy(update={"max_files_per_batch": 1}))
        batch = one.read_batch(spark, start)
        if not batch.has_new_data and start is not None:
            batch.release()
            batch = one.read_batch(spark, None)
        return batch

    def available_now(self, start: Position | None) -> frozenset[str]:
        """The files listed now: an ``available_now`` run reads these, not files that land later."""
        return frozenset(f.path for f in self.list_files())

    def read_batch_until(self, spark: SparkSession, start: Position | None, bound: object) -> Batch:
        """:meth:`read_batch` among the files of ``bound`` (:meth:`available_now`) only."""
        assert isinstance(bound, frozenset)
        return self._read_from(spark, start, [f for f in self.list_files() if f.path in bound])

    def _read_from(self, spark: SparkSession, start: Position | None, listing: list[FileStatus]) -> Batch:
        if start is None:
            start = self.initial_position()
        if not isinstance(start, FileListPosition):
            raise SourceError(f"files source {self.config.path} cannot resume from a {start.kind!r} position")
        grace = int(self.config.late_file_grace.total_seconds() * 1e9)
        taken, end = select_new_files(listing, start, self.config.max_files_per_batch, grace)
        if not taken:
            empty = spark.createDataFrame([], self.config.schema_ddl or "value STRING")
            return Batch(df=empty, errors=empty_errors(spark), start=start, end=start)
        paths = [self._uri(f.path) for f in taken]
        if self.config.format == "avro":
            return Batch(df=self._read_avro(spark, paths), errors=empty_errors(spark), start=start, end=end)
        if self._line_based:
            return self._read_lines(spark, paths, start, end)
        df, errors, cached = self._read_spark(spark, paths)
        return Batch(df=df, errors=errors, start=start, end=end, cached=cached)

    @property
    def _line_based(self) -> bool:
        """JSON Lines and CSV are read line by line (see ``streamer.sources.lines``), unless the
        user asked Spark for records spanning lines (``options: {multiLine: true}``)."""
        multi = {k.lower(): str(v).lower() for k, v in reveal(self.config.options).items()}.get("multiline")
        return self.config.format in ("json", "csv") and multi != "true"

    # -- JSON Lines / CSV, line by line ---------------------------------------------------

    def _read_lines(self, spark: SparkSession, paths: list[str], start: Position, end: Position) -> Batch:
        """Every line keeps its file, number and bytes; schema: declared, else inferred
        (and the target table's types for columns it has, see ``Batch.retype``)."""
        cfg = self.config
        lines = self._lines(spark, paths).cache()
        if cfg.schema_ddl is not None:
            schema, retype = struct_from_ddl(cfg.schema_ddl), None
        else:
            schema = self._infer(spark, lines)
            retype = self._retyper(spark, lines, schema, start, end)
        good, errors, flagged = self._decode(lines, schema)
        return Batch(df=good, errors=errors, start=start, end=end, cached=(lines, flagged), retype=retype,
                     record_columns=(RECORD_COLUMN,), originals=self._originals(spark, lines))

    def _retyper(self, spark: SparkSession, lines: DataFrame, inferred: StructType, start: Position,
                 end: Position) -> Callable[[StructType], Batch]:
        """``Batch.retype``: decode the same cached lines again, preferring given types
        (the pipeline passes the target table's), so nothing is read twice."""

        def retype(types: StructType) -> Batch:
            schema = prefer_types(inferred, types)
            good, errors, flagged = self._decode(lines, schema)
            return Batch(df=good, errors=errors, start=start, end=end, cached=(lines, flagged), retype=None,
                         record_columns=(RECORD_COLUMN,), originals=self._originals(spark, lines))

        return retype

    def _lines(self, spark: SparkSession, paths: list[str]) -> DataFrame:
        """The lines of ``paths`` (:data:`~streamer.sources.lines.LINE_DDL` + record id), split on the executors."""
        from pyspark.sql import functions as F

        limit = int(self.config.max_record_bytes)
        scheme, config_path = self._scheme, self.config.path

        def split(batches: Iterator) -> Iterator:
            import pyarrow as pa

            from streamer.fs import resolve as _resolve
            from streamer.sources.lines import split_lines

            fs, _ = _resolve(config_path)
            for b in batches:
                for index, p in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True):
                    with fs.arrow.open_input_stream(_inside(p, scheme), compression="detect") as fh:
                        for rb in split_lines(fh, p, limit, min(limit, OVERSIZED_KEEP)):
                            yield rb.append_column("_file_index", pa.repeat(pa.scalar(index, pa.int32()), rb.num_rows))

        # one slice per core at most, made by parallelize (a repartition would add a shuffle stage)
        slices = min(len(paths), spark.sparkContext.defaultParallelism)
        files = spark.createDataFrame(spark.sparkContext.parallelize(list(enumerate(paths)), slices),
                                      "index INT, path STRING")
        lines = files.mapInArrow(split, f"{LINE_DDL}, _file_index INT")
        record = F.shiftleft(F.col("_file_index").cast("bigint"), 40).bitwiseOR(F.col("_line"))
        return lines.withColumn(RECORD_COLUMN, record).drop("_file_index")

    def _infer(self, spark: SparkSession, lines: DataFrame) -> StructType:
        """Spark's inference over the batch's decodable lines (all of them, as Spark's own
        reader does: a column seen in one line only is still a column)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType, _parse_datatype_json_string

        cfg = self.config
        text = F.col("_raw").cast("string")
        usable = lines.where(
            (F.col("_size") <= F.lit(int(cfg.max_record_bytes))) & F.is_valid_utf8(text) & (F.length(F.trim(text)) > 0)
        )
        if cfg.format == "csv" and cfg.csv_header:
            # the first file's header names the columns (as in Spark's reader); the
            # other files' header lines are not data
            first = usable.where(F.col("_line") == 1).orderBy(RECORD_COLUMN).limit(1)
            usable = first.unionByName(usable.where(F.col("_line") > 1))
        jvm = spark._jvm
        if jvm is None:
            raise SourceError("schema inference needs Spark's JVM, and this session has none (stopped?)")
        texts = getattr(usable.select(text.alias("value"))._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
        reader = spark._jsparkSession.read()
        for k, v in self._parse_options().items():
            reader = reader.option(k, v)
        if cfg.format == "json":
            jschema = reader.json(texts).schema()
        else:
            jschema = reader.option("inferSchema", "true").option("header", str(cfg.csv_header).lower()).csv(texts).schema()
        schema = _parse_datatype_json_string(jschema.json())
        if not isinstance(schema, StructType):  # Spark's JSON/CSV inference gives records
            raise SourceError(f"schema inference gave {schema.simpleString()}, not a record schema")
        return StructType([f for f in schema.fields if f.name != CORRUPT_COLUMN])

    def _parse_options(self) -> dict[str, str]:
        """The user's reader options, for inference and ``from_json``/``from_csv`` alike
        (so a date format or delimiter means the same in both)."""
        opts = {k: str(v) for k, v in reveal(self.config.options).items()}
        if self.config.format == "csv":
            opts["sep"] = self.config.csv_delimiter
        return opts

    def _decode(self, lines: DataFrame, schema: StructType) -> tuple[DataFrame, DataFrame, DataFrame]:
        """(good rows, error rows, the cached parse serving both) of the lines under
        ``schema``: one error row per bad line. The parse is cached (as Spark's own reader
        path did) so that the good and the bad rows do not each parse every line."""
        from pyspark.sql import functions as F

        cfg = self.config
        limit = int(cfg.max_record_bytes)
        text = F.col("_raw").cast("string")
        dropped: list[tuple[str, str]] = []
        if cfg.format == "json":
            schema, dropped = case_unique(schema, spelling_counts(lines, text, schema))
        rows = lines.withColumn("_valid", F.is_valid_utf8(text)).withColumn(
            "_text", F.when((F.col("_size") <= F.lit(limit)) & F.col("_valid"), text)
        )
        # blank lines (and CSV header lines) are not records
        skip = F.col("_text").isNotNull() & (F.length(F.trim(F.col("_text"))) == 0)
        if cfg.format == "csv" and cfg.csv_header:
            skip = skip | (F.col("_line") == 1)
        rows = rows.where(~skip)
        parsed = rows.withColumn("_p", parse(cfg.format, F.col("_text"), schema, self._parse_options()))
        after = text_after_value(F.col("_text")) if cfg.format == "json" else F.lit(False)
        reason = (
            F.when(
                F.col("_size") > F.lit(limit),
                F.format_string(
                    f"record of %d bytes exceeds source.max_record_bytes ({limit}); "
                    f"raw_payload holds its first {min(limit, OVERSIZED_KEEP)} bytes",
                    F.col("_size"),
                ),
            )
            .when(~F.col("_valid"), F.lit("record is not valid UTF-8 text (raw_payload holds its bytes, base64)"))
            .when(F.col(f"_p.{CORRUPT_COLUMN}").isNotNull(),
                  explain(cfg.format, F.col("_text"), schema, self._parse_options()))
            .when(after, F.lit(TEXT_AFTER_JSON))
        )
        if dropped:  # a key another differs from only in case (``v`` and ``V``)
            clash = case_clash(F.col("_text"), dropped)
            reason = reason.when(clash.isNotNull(), clash)
        flagged = parsed.withColumn("_reason", reason).select(
            "_source_file", "_line", "_valid", "_p", RECORD_COLUMN, "_reason",
            F.when(F.col("_reason").isNotNull(), F.col("_raw")).alias("_raw"),  # bytes kept for bad rows only
        ).cache()
        good = flagged.where(F.col("_reason").isNull()).select(
            *[F.col("_p").getField(f.name).alias(f.name) for f in schema.fields], RECORD_COLUMN
        )
        errors = line_errors(flagged.where(F.col("_reason").isNotNull()), F.col("_reason"))
        return good, errors, flagged

    def _originals(self, spark: SparkSession, lines: DataFrame) -> Callable[[pa.Table], pa.Table]:
        """Error-row identity and original bytes of records, by :data:`RECORD_COLUMN`
        (for records found bad after decoding, e.g. with a null key)."""

        def originals(keys: pa.Table) -> pa.Table:
            from pyspark.sql import functions as F

            wanted = spark.createDataFrame(keys.select([RECORD_COLUMN]).cast(pa.schema([(RECORD_COLUMN, pa.int64())])))
            rows = lines.join(F.broadcast(wanted), RECORD_COLUMN).withColumn("_valid", F.is_valid_utf8(
                F.col("_raw").cast("string")))
            return line_errors(rows, F.lit(None).cast("string"), keep=(RECORD_COLUMN,)).toArrow()

        return originals

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
        elif cfg.format == "parquet":
            # every file's columns: Spark otherwise takes one file's schema, and a column
            # another file of the batch added is dropped unseen
            reader = reader.option("mergeSchema", "true")
        reader = reader.options(**reveal(cfg.options))
        try:
            raw = reader.load(paths)
        except Exception as e:
            if cfg.format != "parquet" or "CANNOT_MERGE" not in str(e):
                raise
            raise SourceError(f"files {cfg.path}: {self._parquet_conflict(paths) or first_line(e)}; read the "
                              "files in separate batches, or declare source.schema") from e
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

    def _parquet_conflict(self, paths: list[str]) -> str | None:
        """The first column two of ``paths`` give different types, named with both files
        (Spark's merge error names neither); ``None`` if their footers agree."""
        import pyarrow.parquet as pq

        seen: dict[str, tuple[pa.DataType, str]] = {}
        for path in paths:
            with self._fs.open_input_file(_inside(path, self._scheme)) as f:
                schema = pq.read_schema(f)
            for field in schema:
                first = seen.setdefault(field.name, (field.type, path))
                if first[0] != field.type:
                    return (f"column '{field.name}' is {first[0]} in {first[1]} and {field.type} in {path}, "
                            "types Spark cannot merge")
        return None

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

    def _avro_reader_schema(self, paths: list[str]) -> dict[str, Any]:
        """The schema the batch's Avro files are read into: the newest file's, with the
        fields only older files have added, and every field some file lacks optional (else
        a column of an older file of the batch is dropped unseen, or the batch refused).
        Every file is checked to resolve into it here, on the driver, so a type two files
        disagree on is refused naming the file and the field."""
        import fastavro

        writers = []
        for path in paths:
            with self._fs.open_input_file(_inside(path, self._scheme)) as f:
                schema = fastavro.reader(f).writer_schema
            if not isinstance(schema, dict) or schema.get("type") != "record":
                raise SourceError(f"{path}: the Avro schema is not a record")
            writers.append(schema)
        fields = {f["name"]: f for f in writers[-1]["fields"]}
        for schema in reversed(writers[:-1]):
            for f in schema["fields"]:
                fields.setdefault(f["name"], f)
        everywhere = set.intersection(*({f["name"] for f in w["fields"]} for w in writers))
        merged = dict(writers[-1], fields=[
            f if name in everywhere else {"name": name, "type": _optional(f["type"]), "default": None}
            for name, f in fields.items()])
        for path, writer in zip(paths, writers, strict=True):
            try:
                with self._fs.open_input_file(_inside(path, self._scheme)) as f:
                    next(iter(fastavro.reader(f, reader_schema=merged)), None)
            except Exception as e:  # fastavro's SchemaResolutionError, and a bad named type
                types = {f["name"]: f["type"] for f in merged["fields"]}
                differ = [f["name"] for f in writer["fields"] if _optional(f["type"]) != _optional(types[f["name"]])]
                field = f"field '{differ[0]}': " if differ else ""
                raise SourceError(f"{path}: {field}its Avro schema does not resolve into the batch's "
                                  f"({first_line(e)}); read it in its own batch") from e
        return merged

    def _read_avro(self, spark: SparkSession, paths: list[str]) -> DataFrame:
        from pyspark.sql.pandas.types import from_arrow_schema

        from streamer.sources.avro import spark_arrow_schema
        from streamer.table.avro_schema import avro_to_arrow

        reader_schema = self._avro_reader_schema(paths)
        arrow_schema = avro_to_arrow(reader_schema)
        spark_arrow = spark_arrow_schema(arrow_schema)
        spark_schema = from_arrow_schema(spark_arrow)
        scheme = self._scheme
        config_path = self.config.path

        def decode(batches: Iterator) -> Iterator:
            import fastavro as fa

            from streamer.fs import resolve as _resolve
            from streamer.sources.avro import records_to_spark_batch

            fs, _ = _resolve(config_path)
            for b in batches:
                for p in b.column(0).to_pylist():
                    with fs.open_input_file(_inside(p, scheme)) as fh:
                        # fastavro types each as any Avro value; a record schema's are dicts
                        records = cast(list[dict[str, Any]], list(fa.reader(fh, reader_schema=reader_schema)))
                    for i in range(0, len(records), 10_000):
                        yield records_to_spark_batch(records[i : i + 10_000], arrow_schema, spark_arrow)

        files = spark.createDataFrame([(p,) for p in paths], "path STRING")
        files = files.repartition(min(len(paths), spark.sparkContext.defaultParallelism))
        return files.mapInArrow(decode, spark_schema)


def _optional(avro_type: Any) -> Any:
    """``avro_type`` that may be null, null first (a field whose default is null)."""
    branches = avro_type if isinstance(avro_type, list) else [avro_type]
    return ["null", *[b for b in branches if b != "null"]]


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
        unstamped_error_time().alias("error_time"),
    )


def parse(fmt: str, text: Column, schema: StructType, options: dict[str, str]) -> Column:
    """``from_json``/``from_csv`` of ``text`` into ``schema`` plus the corrupt-record column."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    full = StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType())])
    opts = {**options, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
    if fmt == "json":
        return F.from_json(text, full, opts)
    return F.from_csv(text, F.lit(_ddl(full)), opts)


def explain(
    fmt: str, text: Column, schema: StructType, options: dict[str, str], malformed: str | None = None
) -> Column:
    """Why a record did not parse into ``schema``, naming the fields at fault.

    Evaluated for bad records only. The record is parsed again with every field a string
    (what does not parse then is malformed text, or for CSV a row with missing or extra
    columns); then, per field, with that field alone typed: the fields that fail are the
    ones whose value does not convert to the column's type.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    loose = StructType([StructField(f.name, StringType()) for f in schema.fields])
    as_text = parse(fmt, text, loose, options)
    culprits = []
    for i, f in enumerate(schema.fields):
        if fmt == "json":
            alone = StructType([f])
        else:  # positional: every other column stays a string
            alone = StructType([f if j == i else StructField(g.name, StringType()) for j, g in enumerate(schema.fields)])
        value = as_text.getField(f.name)
        bad = value.isNotNull() & parse(fmt, text, alone, options).getField(CORRUPT_COLUMN).isNotNull()
        culprits.append(F.when(bad, F.format_string(
            f"field '{f.name}': value %s is not a valid {f.dataType.simpleString()}",
            F.when(F.length(value) > 100, F.concat(F.substring(value, 1, 100), F.lit("..."))).otherwise(value),
        )))
    if malformed is None:
        malformed = "malformed json record" if fmt == "json" else (
            f"malformed csv record: not {len(schema.fields)} columns (missing or extra values, or broken quoting)"
        )
    fields = F.concat_ws("; ", *culprits) if culprits else F.lit("")
    return (
        F.when(as_text.isNull() | as_text.getField(CORRUPT_COLUMN).isNotNull(), F.lit(malformed))
        .when(fields != F.lit(""), fields)
        .otherwise(F.lit(f"{fmt} record does not match the schema"))
    )


def _ddl(schema: StructType) -> str:
    return ", ".join(f"`{f.name.replace('`', '``')}` {f.dataType.simpleString()}" for f in schema.fields)


def prefer_types(inferred: StructType, table: StructType) -> StructType:
    """``inferred`` with the table's type for every column the table has.

    Why: inference takes the widest type it sees, so one ``"ts": "not-a-number"`` would
    make the whole batch's ``ts`` a string (and the batch be refused by the table). A
    column the table knows is parsed as the table's type, and a value that does not fit
    makes only its record an error. New columns keep their inferred type; new sub-fields
    of a struct are kept beside the table's.
    """
    from pyspark.sql.types import StructField, StructType

    known = {f.name: f.dataType for f in table.fields}
    return StructType(
        [StructField(f.name, _prefer(f.dataType, known[f.name]) if f.name in known else f.dataType, True)
         for f in inferred.fields]
    )


def _prefer(inferred: DataType, table: DataType) -> DataType:
    from pyspark.sql.types import StructType

    if isinstance(inferred, StructType) and isinstance(table, StructType):
        return _merge_struct(inferred, table)
    return table


def _merge_struct(inferred: StructType, table: StructType) -> StructType:
    from pyspark.sql.types import StructField, StructType

    have = {f.name for f in table.fields}
    by_name = {f.name: f.dataType for f in inferred.fields}
    fields = [StructField(f.name, _prefer(by_name[f.name], f.dataType) if f.name in by_name else f.dataType, True)
              for f in table.fields]
    fields += [StructField(f.name, f.dataType, True) for f in inferred.fields if f.name not in have]
    return StructType(fields)


def line_errors(rows: DataFrame, reason: Column, keep: tuple[str, ...] = ()) -> DataFrame:
    """Error rows of lines (``_source_file``, ``_line``, ``_raw``, ``_valid``): the
    position is ``file:line``, the payload the line's bytes as text (base64 if not UTF-8)."""
    from pyspark.sql import functions as F

    valid = F.col("_valid")
    return rows.select(
        *keep,
        F.lit("files").alias("source_type"),
        F.concat(F.col("_source_file"), F.lit(":"), F.col("_line").cast("string")).alias("source_position"),
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        F.lit(None).cast("bigint").alias("offset"),
        F.col("_source_file").alias("file"),
        F.when(valid, F.col("_raw").cast("string")).otherwise(F.base64(F.col("_raw"))).alias("raw_payload"),
        F.when(valid, F.lit("utf-8")).otherwise(F.lit("base64")).alias("payload_encoding"),
        reason.cast("string").alias("reason"),
        unstamped_error_time().alias("error_time"),
    ).select(*keep, *ERROR_COLUMNS)


def _inside(uri: str, scheme: str | None) -> str:
    return uri.split("://", 1)[1] if scheme else posixpath.normpath(uri)


def text_after_value(text: Column) -> Column:
    """Whether JSON ``text``, whose first value parsed, holds more than white space after it:
    a second object (``{..}\\n{..}``, ``{..} {..}``) or other text, which a JSON parse of the
    first value ignores (Spark's, and Jackson's under HoodieStreamer), so the rest would be
    lost unseen. Vectorised: a regex finds a closing brace or bracket followed by something
    JSON never puts there (one pass, no backtracking); only a record it finds is parsed
    again, inside ``[...]``, where Jackson reads every value and refuses text between them
    (a brace inside a string literal proves nothing). Never null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, StringType

    values = F.from_json(F.concat(F.lit("["), text, F.lit("]")), ArrayType(StringType()))
    one = F.coalesce(F.size(values) == F.lit(1), F.lit(False))
    return F.coalesce(F.when(text.rlike(_NOT_AFTER_CLOSE), ~one), F.lit(False))


def spelling_counts(rows: DataFrame, text: Column, schema: StructType) -> dict[str, int]:
    """How many of ``rows``' JSON records (``text``) hold each top-level field of ``schema``
    whose name another differs from only in case; empty (and no Spark job) when none does."""
    from pyspark.sql import functions as F

    groups: dict[str, list[str]] = {}
    for f in schema.fields:
        groups.setdefault(f.name.lower(), []).append(f.name)
    clashing = [name for names in groups.values() if len(names) > 1 for name in names]
    if not clashing:
        return {}
    counts = rows.select(*[F.count(_only(text, name)).alias(f"n{i}") for i, name in enumerate(clashing)]).first()
    return {name: int(counts[i]) if counts is not None else 0 for i, name in enumerate(clashing)}


def case_unique(schema: StructType, counts: dict[str, int] | None = None) -> tuple[StructType, list[tuple[str, str]]]:
    """``schema`` with one field per name whatever its case - the spelling most records
    hold (``counts``, :func:`spelling_counts`), else the first - and the ``(dropped, kept)``
    name pairs of the others.

    Why: JSON keys are case-sensitive and Spark's inference keeps ``v`` and ``V`` apart,
    but Spark's column names, and Hudi's, are not: reading either field of the record then
    fails as ambiguous, the batch on every run. The records that hold a dropped spelling
    go to the error table (:func:`case_clash`); the others are written."""
    from pyspark.sql.types import StructType

    counts = counts or {}
    kept: dict[str, str] = {}
    for f in schema.fields:  # the most held spelling; the first of equals
        best = kept.setdefault(f.name.lower(), f.name)
        if counts.get(f.name, 0) > counts.get(best, 0):
            kept[f.name.lower()] = f.name
    dropped = list(dict.fromkeys((f.name, kept[f.name.lower()]) for f in schema.fields
                                 if kept[f.name.lower()] != f.name))
    # a key a record repeats (``{"v": 5, "v": 6}``) may be inferred twice: one field, whose
    # value the parse takes from the key's last occurrence, as Jackson's does under Hudi
    unique = _one_per_name(StructType([f for f in schema.fields if kept[f.name.lower()] == f.name]))
    assert isinstance(unique, StructType)
    return (schema, []) if unique == schema else (unique, dropped)


def _one_per_name(t: DataType) -> DataType:
    """``t`` with each struct's repeated field names (a key a record repeats, at any
    depth) made one field, the first; Arrow refuses a struct that repeats a name."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(t, StructType):
        fields: dict[str, StructField] = {}
        for f in t.fields:
            fields.setdefault(f.name, StructField(f.name, _one_per_name(f.dataType), f.nullable, f.metadata))
        return StructType(list(fields.values()))
    if isinstance(t, ArrayType):
        return ArrayType(_one_per_name(t.elementType), t.containsNull)
    if isinstance(t, MapType):
        return MapType(t.keyType, _one_per_name(t.valueType), t.valueContainsNull)
    return t


def case_clash(text: Column, dropped: list[tuple[str, str]]) -> Column:
    """Why a JSON record ``text`` is an error row: it holds a top-level key of ``dropped``
    (:func:`case_unique`), named with the spelling kept; null when it holds none."""
    from pyspark.sql import functions as F

    return F.coalesce(*[F.when(_only(text, name).isNotNull(), F.lit(
        f"field '{name}' differs from field '{first}' only in case; Spark and Hudi take column "
        f"names whatever their case, and the batch's column is '{first}', which most records spell so"))
        for name, first in dropped])


def _only(text: Column, name: str) -> Column:
    """The top-level key ``name`` of JSON ``text`` as text, matched by its exact case (as
    Spark's JSON parse matches keys), or null; parsed alone, so no other spelling of the
    name makes the field ambiguous."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    return F.from_json(text, StructType([StructField(name, StringType())])).getField(name)
