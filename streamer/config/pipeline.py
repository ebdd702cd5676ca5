"""One pipeline (source → transforms → target) and the file that holds many.

Defaults that depend on other fields (table name, error table path, checkpoint folder)
are filled here, once, so the runner, the CLI and the docs all see the same values.
"""

from __future__ import annotations

import posixpath
import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from streamer import defaults
from streamer.config.base import OptionMap, StrictModel
from streamer.config.policies import PoliciesConfig
from streamer.config.sources import SourceConfig
from streamer.config.target import TargetConfig
from streamer.config.transforms import TransformConfig
from streamer.config.units import Duration, format_duration

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class TriggerConfig(StrictModel):
    """``once``: one batch (capped by the source's batch size), commit, exit.
    ``available_now``: everything available when the run starts, in capped batches, then
    exit (Spark's ``availableNow``; the mode for scheduled jobs: what arrives meanwhile is
    the next run's). ``continuous``: a batch every ``interval`` until stopped."""

    #: ``once``, ``available_now`` or ``continuous`` (see the section summary); ``continuous`` is
    #: HoodieStreamer's ``--continuous``, ``once`` its default run.
    mode: Literal["once", "available_now", "continuous"] = "once"
    #: Time between batch starts in ``continuous`` mode.
    interval: Duration = Field(default="10s")
    #: How a continuous pipeline over a streaming source (Kafka) gets its micro-batches:
    #: ``stream``: a Spark Structured Streaming query (``foreachBatch``); ``poll``: every
    #: ``interval`` the driver plans the batch's end offsets (capped by the batch size) and
    #: reads exactly that range, as ``once`` does - no end-offsets job per batch. Other
    #: sources always poll.
    read: Literal["stream", "poll"] = "stream"

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


def _engine_shorthand(value: object) -> object:
    return {"mode": value} if isinstance(value, str) else value


class PipelineConfig(StrictModel):
    """One source → transforms → Hudi MOR table, with its services and trigger."""

    #: Pipeline name (letters, digits, ``_``, ``-``); defaults ``target.table_name``, ``errors.path``,
    #: ``checkpoint_dir`` and the Kafka ``group_id`` from it.
    name: str
    source: SourceConfig
    transforms: list[TransformConfig] = []
    target: TargetConfig
    policies: PoliciesConfig = PoliciesConfig()
    errors: ErrorsConfig = ErrorsConfig()
    trigger: TriggerConfig = TriggerConfig()
    engine: Annotated[EngineConfig, BeforeValidator(_engine_shorthand)] = EngineConfig()
    spark: SparkSettings = SparkSettings()
    #: Spark Structured Streaming checkpoint folder (continuous mode with Kafka).
    checkpoint_dir: str | None = None
    #: Run-wide Prometheus metrics, normally given at the top level of the file (inherited).
    metrics: MetricsConfig | None = None
    #: Run-wide JSON progress events, normally given at the top level of the file (inherited).
    progress: ProgressConfig | None = None

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

    @model_validator(mode="after")
    def _coherent(self) -> PipelineConfig:
        if self.errors.path and self.errors.path.rstrip("/") == self.target.path.rstrip("/"):
            raise ValueError("errors.path must differ from target.path")
        if self.trigger.mode == "continuous" and self.trigger.interval <= timedelta(0):
            raise ValueError("trigger.interval must be positive in continuous mode")
        return self

    def summary(self) -> str:
        """One line for ``streamer validate`` and logs (never contains secrets)."""
        src = self.source
        if src.type == "kafka":
            what = f"kafka({src.format}) {src.topic}@{src.bootstrap_servers}"
        elif src.type == "files":
            what = f"files({src.format}) {src.path}"
        else:
            what = f"generator(seed={src.seed}, {src.records_per_batch}/batch)"
        t = self.target
        parts = f"key={','.join(t.record_key)}"
        if t.partition_by:
            parts += f" partition={','.join(t.partition_by)}"
        trig = self.trigger.mode
        if trig == "continuous":
            trig += f"/{format_duration(self.trigger.interval)}"
        return (
            f"{self.name}: {what} -> {t.path} [{t.table_name}, {t.operation}, {parts}] "
            f"{len(self.transforms)} transform(s), trigger={trig}, engine={self.engine.mode}"
        )


class PipelinesFile(StrictModel):
    """The top level of a pipeline YAML file (names/paths are checked unique by the loader).

    ``metrics`` and ``progress`` apply to the whole run; each pipeline inherits them
    (a pipeline's own setting wins), so the loader hands them on with the pipelines.
    """

    #: Prometheus metrics of the run: endpoint and/or push gateway (docs/operations.md).
    metrics: MetricsConfig | None = None
    #: One JSON progress event per micro-batch, to a file or standard output.
    progress: ProgressConfig | None = None
    pipelines: list[PipelineConfig] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _inherit_run_settings(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("pipelines"), list):
            return data
        shared = {k: data[k] for k, model in (("metrics", MetricsConfig), ("progress", ProgressConfig))
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
