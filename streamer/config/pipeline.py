"""One pipeline (source → transforms → target) and the file that holds many.

Defaults that depend on other fields (table name, error table path, checkpoint folder)
are filled here, once, so the runner, the CLI and the docs all see the same values.
"""

from __future__ import annotations

import posixpath
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator

from streamer import defaults
from streamer.config.base import OptionMap, StrictModel
from streamer.config.policies import PoliciesConfig
from streamer.config.sources import DEBEZIUM_ORDERING, SourceConfig
from streamer.config.target import PRIMARY_KEY, FieldList, IndexSettings, TargetConfig
from streamer.config.transforms import TABLE_FREE_TYPES, TransformConfig
from streamer.config.units import Duration, format_duration

if TYPE_CHECKING:
    from streamer.fs_s3 import S3Settings

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class TriggerConfig(StrictModel):
    """``once``: one batch (capped by the source's batch size), commit, exit (plus one small
    batch of the deletes a Debezium batch held back, docs/kafka.md).
    ``available_now``: everything available when the run starts, in capped batches, then
    exit (Spark's ``availableNow``; the mode for scheduled jobs: what arrives meanwhile is
    the next run's). ``continuous``: a batch every ``interval`` until stopped."""

    #: ``once``, ``available_now`` or ``continuous`` (see the section summary); ``continuous`` is
    #: HoodieStreamer's ``--continuous``, ``once`` its default run.
    mode: Literal["once", "available_now", "continuous"] = "once"
    #: Time between batch starts in ``continuous`` mode.
    interval: Duration = Field(default=timedelta(seconds=10))
    #: How a continuous pipeline over a streaming source (Kafka) gets its micro-batches:
    #: ``poll`` (HoodieStreamer's way): every ``interval`` the driver plans the batch's end
    #: offsets (capped by the batch size) and reads exactly that range, as ``once`` does;
    #: ``stream``: a Spark Structured Streaming query (``foreachBatch``), which costs an
    #: end-offsets job per batch (0.5x the throughput and ~1.5 s more latency measured in
    #: benchmarks/RESULTS.md). Other sources always poll.
    read: Literal["stream", "poll"] = "poll"

    def spark_processing_time(self) -> str:
        """The ``processingTime`` string for ``DataStreamWriter.trigger``."""
        return f"{round(self.interval.total_seconds() * 1000)} milliseconds"


class EngineConfig(StrictModel):
    """Where per-file-group work runs. ``engine: auto`` is shorthand for ``{mode: auto}``.

    The one setting the engine is chosen from: the batch step decides with
    ``local_max_records`` (collect to the driver or not), and the writer is given the
    same threshold and the engine that decision implies (``streamer.pipeline.sink``).
    """

    #: ``local``: file groups written on the driver (``local_threads``); ``spark``: on the executors;
    #: ``auto``: chosen per batch by ``local_max_records``.
    mode: Literal["auto", "local", "spark"] = "auto"
    #: ``auto`` writes batches up to this many records on the driver, larger ones on executors.
    local_max_records: Annotated[int, Field(gt=0)] = defaults.LOCAL_MAX_ROWS
    #: Driver threads of the local engine (file-group writes and the index lookup).
    local_threads: Annotated[int, Field(gt=0)] = defaults.LOCAL_THREADS


class SparkSettings(StrictModel):
    """The SparkSession a pipeline needs (only honoured by the first session of a process)."""

    #: Spark ``spark.master``; None = ``$MOR_STREAMER_SPARK_MASTER``, else ``local[*]``.
    master: str | None = None
    #: Extra Spark settings (``spark.*``), over the built-in defaults; secret-looking values are masked.
    conf: OptionMap = {}


class ErrorsConfig(StrictModel):
    """The error table: bad records with the reason and raw payload, never silently dropped."""

    #: The error table (a Hudi table); default ``<folder of target.path>/_errors/<name>``.
    path: str | None = None
    #: Fail the batch (no commit) if more than this fraction of its records are bad; None = never.
    max_error_fraction: Annotated[float, Field(ge=0, le=1)] | None = None


class PushGatewayConfig(StrictModel):
    """Push the run's metrics to a Prometheus push gateway (for runs a scraper cannot reach).

    Pushed after every batch (``interval`` unset) or every ``interval``, and once more
    at the end of the run. A push that fails is logged; it never stops a pipeline.
    """

    #: The gateway's base URL, e.g. ``http://pushgateway:9091``.
    url: str
    #: The ``job`` grouping label on the gateway.
    job: str = "mor-streamer"
    #: Push every this long; unset = after every batch (and always once at the end).
    interval: Duration | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"push_gateway.url {v!r} must be an http:// or https:// URL")
        return v


class MetricsConfig(StrictModel):
    """Prometheus metrics of a run (see docs/operations.md for the series).

    Process-wide: one endpoint serves every pipeline of a ``streamer run`` (labels
    ``pipeline`` and ``table`` tell them apart). Set it at the top level of the file;
    pipelines inherit it, and all pipelines of one run must agree.
    """

    #: Serve ``/metrics`` on this port while the run lasts (0 = any free port, logged).
    port: Annotated[int, Field(ge=0, le=65535)] | None = None
    #: Address the endpoint binds to.
    host: str = "0.0.0.0"
    push_gateway: PushGatewayConfig | None = None
    #: Table layout gauges (file groups, log files and blocks per slice) after each commit.
    table_layout: bool = True


class ProgressConfig(StrictModel):
    """One JSON object per micro-batch (JSON Lines), like Spark's ``StreamingQueryProgress``.

    ``path: "-"`` writes to standard output; a file is appended to. Process-wide like
    ``metrics``.
    """

    #: File the events are appended to; ``-`` = standard output.
    path: str = Field(min_length=1)


_ENDPOINT = re.compile(r"^https?://[^/\s?#@]+/?$")


class S3StorageConfig(StrictModel):
    """An S3 or S3-compatible store (MinIO, s3proxy, R2, ...) for the pipeline's ``s3://`` paths.

    Applies to the table, the error table, the checkpoint folder and the lease of the
    pipeline (``s3a://``/``s3n://`` spellings included). Every field left unset falls back
    to the usual AWS chain (``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``, ``AWS_REGION``,
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``~/.aws`` profiles, instance roles), so a
    file without ``storage`` behaves exactly as before. Give secrets as ``${VAR}``
    references: they are masked in every log, summary, error and dump (docs/object-storage.md).
    """

    # Where the store answers, beside the check of its URL.
    #: The S3 API's URL for an S3-compatible store, ``http(s)://host[:port]``; unset =
    #: ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``, else AWS S3 itself (Hadoop's ``fs.s3a.endpoint``).
    endpoint: str | None = None
    #: Region; unset = ``AWS_REGION``/``AWS_DEFAULT_REGION``, else the ``profile``'s, else the bucket's
    #: (asked once; a custom endpoint defaults to ``us-east-1``).
    region: str | None = None
    #: ``true``: path-style URLs (``endpoint/bucket/key``); ``false``: virtual-hosted
    #: (``bucket.endpoint/key``); unset = path-style for a custom ``endpoint``, virtual-hosted on AWS
    #: (Hadoop's ``fs.s3a.path.style.access``).
    path_style: bool | None = None

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: str | None) -> str | None:
        if v is not None and "@" in v.split("/")[2 if "//" in v else 0]:
            # never echoed: what precedes the @ may be a password
            raise ValueError("endpoint must be a URL without a path or credentials (user:password@): "
                             "give access_key_id and secret_access_key instead")
        if v is not None and not _ENDPOINT.match(v):
            raise ValueError(f"endpoint {v!r} must be a URL without a path, "
                             "e.g. http://127.0.0.1:9000 or https://s3.example.com")
        return v.rstrip("/") if v else v

    # With which credentials; then the checks of blank values and of the credentials as a whole.
    #: Access key id, given with ``secret_access_key``; unset = the AWS credential chain
    #: (Hadoop's ``fs.s3a.access.key``).
    access_key_id: str | None = None
    #: Secret access key of ``access_key_id`` (a secret: masked in logs and dumps; Hadoop's
    #: ``fs.s3a.secret.key``).
    secret_access_key: SecretStr | None = None
    #: Session token of temporary credentials, with ``access_key_id`` (a secret: masked).
    session_token: SecretStr | None = None
    #: A named profile of ``~/.aws/config``/``credentials`` instead of keys (its credentials are
    #: read once per location at start: temporary ones are not renewed for data files).
    profile: str | None = None

    @field_validator("endpoint", "region", "access_key_id", "secret_access_key", "session_token", "profile",
                     mode="before")
    @classmethod
    def _blank_is_unset(cls, v: object) -> object:
        """``${VAR:-}`` of an unset variable means "not given", so the AWS chain decides."""
        return None if isinstance(v, str) and not v.strip() else v

    @model_validator(mode="after")
    def _credentials(self) -> S3StorageConfig:
        # messages name the settings, never their values
        keys = self.access_key_id is not None, self.secret_access_key is not None
        if keys[0] != keys[1]:
            raise ValueError("access_key_id and secret_access_key must be given together")
        if self.session_token is not None and not keys[0]:
            raise ValueError("session_token needs access_key_id and secret_access_key")
        if self.profile is not None and keys[0]:
            raise ValueError("give either profile or access_key_id/secret_access_key, not both")
        return self

    def settings(self, source: str = "storage.s3") -> S3Settings:
        """What :func:`streamer.fs.resolve` takes; ``source`` names this block in errors."""
        from streamer.fs_s3 import S3Settings

        return S3Settings(endpoint=self.endpoint, region=self.region, access_key_id=self.access_key_id,
                          secret_access_key=self.secret_access_key, session_token=self.session_token,
                          profile=self.profile, path_style=self.path_style, source=source)


class StorageConfig(StrictModel):
    """Where the pipeline's storage answers and with which credentials (today: S3).

    Normally given at the top level of the file and inherited by every pipeline; a
    pipeline's own ``storage`` replaces it (pipelines of one run may use different stores).
    """

    #: Settings for ``s3://``/``s3a://``/``s3n://`` locations; unset = the AWS environment alone.
    s3: S3StorageConfig | None = None


def _engine_shorthand(value: object) -> object:
    return {"mode": value} if isinstance(value, str) else value


class TableOverride(StrictModel):
    """One table of a ``topic_pattern`` pipeline where it differs from ``target``, by the
    table's name (the topic's last segment: ``orders`` of ``shop.public.orders``)."""

    #: Leave the table out of the run.
    skip: bool = False
    #: The table's record key, instead of the primary key its message keys carry.
    record_key: FieldList | None = None
    #: The table's partition fields, instead of ``target.partition_by``.
    partition_by: FieldList | None = None
    #: The table's index, instead of ``target.index`` (a table partitioned by a column that
    #: updates wants ``global_bloom``).
    index: IndexSettings | None = None


class PipelineConfig(StrictModel):
    """One source → transforms → Hudi MOR table, with its services and trigger."""

    #: Pipeline name (letters, digits, ``_``, ``-``, starting with a letter or ``_``); defaults
    #: ``target.table_name`` (``-`` as ``_``), ``errors.path``, ``checkpoint_dir`` and the Kafka
    #: ``group_id`` from it.
    name: str
    source: SourceConfig
    transforms: list[TransformConfig] = []
    target: TargetConfig
    #: With a source ``topic_pattern``: per-table settings, by table name.
    tables: dict[str, TableOverride] = {}
    policies: PoliciesConfig = PoliciesConfig()
    errors: ErrorsConfig = ErrorsConfig()
    trigger: TriggerConfig = TriggerConfig()
    engine: Annotated[EngineConfig, BeforeValidator(_engine_shorthand)] = EngineConfig()
    spark: SparkSettings = SparkSettings()
    #: The pipeline's own folder: its lease (one running process per pipeline) in every mode,
    #: and Spark Structured Streaming's checkpoint with ``trigger.read: stream``. Unset =
    #: ``<folder of target.path>/_checkpoints/<name>``.
    checkpoint_dir: str | None = None
    #: Run-wide Prometheus metrics, normally given at the top level of the file (inherited).
    metrics: MetricsConfig | None = None
    #: Run-wide JSON progress events, normally given at the top level of the file (inherited).
    progress: ProgressConfig | None = None
    #: Object-store endpoint and credentials for the pipeline's table, error table, checkpoint
    #: folder and lease; normally given at the top level of the file (inherited).
    storage: StorageConfig | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"name {v!r} must start with a letter or _ and use letters, digits, _ or -")
        return v

    @model_validator(mode="before")
    @classmethod
    def _derived_defaults(cls, data: Any) -> Any:
        """Fill table name, error path and checkpoint folder from ``name`` and ``target.path``."""
        if not isinstance(data, dict):
            return data
        name, target = data.get("name"), data.get("target")
        if not isinstance(name, str) or not isinstance(target, dict):
            return data
        data = dict(data)
        source = data.get("source")
        if (isinstance(source, dict) and source.get("type") == "kafka" and source.get("group_id") is None
                and _NAME.match(name)):
            # one consumer group per pipeline: two pipelines reading one topic into two
            # tables must not overwrite each other's mirrored offsets
            data["source"] = {**source, "group_id": f"mor-streamer-{name}"}
        if isinstance(source, dict) and source.get("topic_pattern") is not None and target.get("record_key") is None:
            target = data["target"] = {**target, "record_key": [PRIMARY_KEY]}
        if isinstance(source, dict) and source.get("debezium") in DEBEZIUM_ORDERING \
                and target.get("ordering_field") is None:
            # a change stream orders by the database log's position, never by wall time
            target = data["target"] = {**target, "ordering_field": DEBEZIUM_ORDERING[source["debezium"]]}
        if target.get("table_name") is None and _NAME.match(name):
            data["target"] = {**target, "table_name": name.replace("-", "_")}
        path = target.get("path")
        if isinstance(path, str) and path:
            base = posixpath.dirname(path.rstrip("/")) or "."
            errors = data.get("errors")
            if errors is None:
                errors = {}
            if isinstance(errors, dict) and errors.get("path") is None:
                data["errors"] = {**errors, "path": posixpath.join(base, "_errors", name)}
            if data.get("checkpoint_dir") is None:
                data["checkpoint_dir"] = posixpath.join(base, "_checkpoints", name)
        return data

    @property
    def is_pattern(self) -> bool:
        """Whether the source names its topics by pattern: one table per topic."""
        return getattr(self.source, "topic_pattern", None) is not None

    @model_validator(mode="after")
    def _coherent(self) -> PipelineConfig:
        if self.is_pattern:
            if "{table}" not in self.target.path:
                raise ValueError("with source.topic_pattern, target.path must name each table's "
                                 "folder with {table} (lake/shop/{table})")
            if self.target.catalog is not None and self.target.catalog.table is not None:
                # every table would register under that one name, each sync undoing the last
                raise ValueError("with source.topic_pattern, leave target.catalog.table unset: each table "
                                 "registers under its own name (target.catalog.database groups them)")
        elif self.tables:
            raise ValueError("tables is for a source with topic_pattern (one table per topic)")
        elif PRIMARY_KEY in self.target.record_key:
            raise ValueError(f"target.record_key {PRIMARY_KEY} is for a source with topic_pattern")
        global_index = [f"tables.{t}.index" for t, o in self.tables.items()
                        if o.index is not None and o.index.type == "global_bloom"]
        if self.target.index.type == "global_bloom":
            global_index.insert(0, "target.index")
        if global_index and self.engine.mode == "spark":
            raise ValueError(f"{global_index[0]} global_bloom looks every key up on the driver: "
                             "engine.mode must be local or auto, not spark")
        if self.errors.path and self.errors.path.rstrip("/") == self.target.path.rstrip("/"):
            raise ValueError("errors.path must differ from target.path")
        if self.trigger.mode == "continuous" and self.trigger.interval <= timedelta(0):
            raise ValueError("trigger.interval must be positive in continuous mode")
        return self

    def may_read_tables(self) -> bool:
        """Whether a transform may read a table through Spark (SQL text or user code can
        name one, e.g. a lookup join with a lake table ``USING morhudi``)."""
        return any(t.type not in TABLE_FREE_TYPES for t in self.transforms)

    def s3_settings(self) -> S3Settings | None:
        """The ``storage.s3`` settings every path of this pipeline resolves with (None: the
        AWS environment alone)."""
        if self.storage is None or self.storage.s3 is None:
            return None
        return self.storage.s3.settings(f"pipeline {self.name}: storage.s3")

    def summary(self) -> str:
        """One line for ``streamer validate`` and logs (never contains secrets)."""
        src = self.source
        if src.type == "kafka":
            cdc = f", debezium {src.debezium}" if src.debezium else ""
            topic = src.topic or f"/{src.topic_pattern}/"
            what = f"kafka({src.format}{cdc}) {topic}@{src.bootstrap_servers}"
        elif src.type == "files":
            what = f"files({src.format}) {src.path}"
        else:
            what = f"generator(seed={src.seed}, {src.records_per_batch}/batch)"
        t = self.target
        parts = f"key={','.join(t.record_key)}"
        if t.partition_by:
            parts += f" partition={','.join(t.partition_by)}"
        trig: str = self.trigger.mode
        if trig == "continuous":
            trig += f"/{format_duration(self.trigger.interval)}"
        return (
            f"{self.name}: {what} -> {t.path} [{t.table_name}, {t.operation}, {parts}] "
            f"{len(self.transforms)} transform(s), trigger={trig}, engine={self.engine.mode}"
            + (f", s3={self.storage.s3.endpoint or 'aws'}" if self.storage and self.storage.s3 else "")
        )


class PipelinesFile(StrictModel):
    """The top level of a pipeline YAML file (names/paths are checked unique by the loader).

    ``metrics`` and ``progress`` apply to the whole run; each pipeline inherits them
    (a pipeline's own setting wins), so the loader hands them on with the pipelines.
    ``storage`` is inherited the same way (a pipeline's own block replaces it whole).
    """

    #: Prometheus metrics of the run: endpoint and/or push gateway (docs/operations.md).
    metrics: MetricsConfig | None = None
    #: One JSON progress event per micro-batch, to a file or standard output.
    progress: ProgressConfig | None = None
    #: Object-store endpoint and credentials, inherited by every pipeline (docs/object-storage.md).
    storage: StorageConfig | None = None
    pipelines: list[PipelineConfig] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _inherit_run_settings(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("pipelines"), list):
            return data
        shared = {k: data[k] for k, model in (("metrics", MetricsConfig), ("progress", ProgressConfig),
                                           ("storage", StorageConfig))
                  if data.get(k) is not None and _valid(model, data[k])}  # a bad one is reported once, here
        if not shared:
            return data
        pipelines = [
            {**shared, **p} if isinstance(p, dict) else p for p in data["pipelines"]
        ]
        return {**data, "pipelines": pipelines}


def _valid(model: type[StrictModel], value: Any) -> bool:
    try:
        model.model_validate(value)
    except ValueError:  # pydantic's ValidationError is one
        return False
    return True
