"""Source configs: ``source: {type: kafka|files|generator, ...}``.

The option names and defaults of every source live here and nowhere else; the
readers in the top-level ``sources`` package take these models as their only input.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from streamer.config.base import OptionMap, StrictModel
from streamer.config.units import Duration, Size

# -- kafka ------------------------------------------------------------------------------


class KafkaSecurity(StrictModel):
    """Consumer security. Maps to ``kafka.security.protocol`` / ``kafka.sasl.*`` / ``kafka.ssl.*``."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_truststore_location: str | None = None
    ssl_truststore_password: SecretStr | None = None
    ssl_keystore_location: str | None = None
    ssl_keystore_password: SecretStr | None = None
    ssl_key_password: SecretStr | None = None
    ssl_endpoint_identification_algorithm: str | None = None

    @model_validator(mode="after")
    def _sasl_complete(self) -> KafkaSecurity:
        sasl = self.protocol.startswith("SASL")
        if sasl and (self.sasl_username is None or self.sasl_password is None):
            raise ValueError(f"protocol {self.protocol} needs sasl_username and sasl_password")
        if not sasl and (self.sasl_username or self.sasl_password or self.sasl_mechanism):
            raise ValueError(f"sasl_* settings need protocol SASL_PLAINTEXT or SASL_SSL, not {self.protocol}")
        return self

    @property
    def effective_sasl_mechanism(self) -> str | None:
        if not self.protocol.startswith("SASL"):
            return None
        return self.sasl_mechanism or "PLAIN"


class SchemaRegistry(StrictModel):
    """Confluent Schema Registry client settings (schemas are fetched once per id and cached)."""

    url: str
    basic_auth_user: str | None = None
    basic_auth_password: SecretStr | None = None
    #: Subject whose latest schema is the reader schema; default ``<topic>-value``.
    subject: str | None = None
    timeout: Duration = Field(default="10s")

    @field_validator("basic_auth_user", "basic_auth_password", mode="before")
    @classmethod
    def _blank_is_unset(cls, v: object) -> object:
        # `${USER:-}` in YAML yields "": no credentials rather than an empty user name.
        return None if v == "" else v

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"schema registry url must start with http:// or https://, got {v!r}")
        return v.rstrip("/")


StartingOffsets = Literal["earliest", "latest"] | dict[int, Annotated[int, Field(ge=0)]]


class KafkaSourceConfig(StrictModel):
    """A Kafka topic of JSON or Confluent-Avro records."""

    type: Literal["kafka"]
    bootstrap_servers: str = Field(min_length=1)
    topic: str = Field(min_length=1)
    format: Literal["json", "avro"] = "json"
    #: Where a pipeline with no stored position starts: earliest, latest or {partition: offset}.
    starting_offsets: StartingOffsets = "earliest"
    #: Upper bound of records per micro-batch (Spark's ``maxOffsetsPerTrigger``); None = all.
    max_records_per_batch: Annotated[int, Field(gt=0)] | None = None
    fail_on_data_loss: bool = True
    #: Consumer group (Kafka ``group.id``) that mirrors the table's position after each
    #: commit, for lag dashboards (Burrow, ``kafka-consumer-groups``); default in a pipeline
    #: file: ``mor-streamer-<pipeline name>`` (one group per pipeline), else ``mor-streamer-<topic>``.
    #: The table's stored position stays the truth for where a run resumes.
    group_id: str | None = None
    #: Commit each table commit's end offsets to ``group_id`` (HoodieStreamer's
    #: ``enable.commit.offset``); a failed group commit is a warning, never a failed batch.
    commit_offsets: bool = True
    security: KafkaSecurity = KafkaSecurity()
    #: Extra ``kafka.*`` consumer options passed through verbatim (secret-looking ones masked).
    options: OptionMap = {}
    #: JSON: Spark DDL of the payload (``"uuid STRING, ts BIGINT"``); None = infer from a sample.
    schema_ddl: str | None = Field(default=None, alias="schema")
    infer_sample_records: Annotated[int, Field(gt=0)] = 10_000
    #: Avro: registry to resolve schema ids, or a fixed ``.avsc`` file (relative to the YAML file).
    schema_registry: SchemaRegistry | None = None
    avro_schema_file: str | None = None
    #: Avro framing: ``confluent`` (magic byte + schema id) or ``raw`` (bare Avro body).
    avro_wire_format: Literal["confluent", "raw"] = "confluent"
    #: Add ``_kafka_topic/_kafka_partition/_kafka_offset/_kafka_timestamp`` columns to good rows.
    include_metadata: bool = False
    #: Records larger than this go to the error table instead of the table (None = no limit).
    max_record_bytes: Size | None = 8 * 1024**2
    #: Timeout for driver-side metadata calls (partitions, watermarks).
    metadata_timeout: Duration = Field(default="30s")

    model_config = StrictModel.model_config | {"populate_by_name": True}

    @property
    def commit_group_id(self) -> str:
        """The consumer group offsets are committed to (``group_id``, else one per topic)."""
        return self.group_id or f"mor-streamer-{self.topic}"

    @model_validator(mode="after")
    def _format_options(self) -> KafkaSourceConfig:
        if self.format == "avro":
            if (self.schema_registry is None) == (self.avro_schema_file is None):
                raise ValueError("format avro needs exactly one of schema_registry or avro_schema_file")
            if self.avro_wire_format == "raw" and self.avro_schema_file is None:
                raise ValueError("avro_wire_format raw needs avro_schema_file (no schema id to look up)")
            if self.schema_ddl is not None:
                raise ValueError("schema (Spark DDL) is for format json; Avro brings its own schema")
        elif self.schema_registry is not None or self.avro_schema_file is not None:
            raise ValueError("schema_registry/avro_schema_file need format avro")
        for key in self.options:
            if not key.startswith("kafka."):
                raise ValueError(f"options key {key!r} must start with 'kafka.' (consumer settings)")
        return self


# -- files ------------------------------------------------------------------------------


class FilesSourceConfig(StrictModel):
    """A folder of files, picked up incrementally (new files since the stored position)."""

    type: Literal["files"]
    path: str = Field(min_length=1)
    format: Literal["json", "csv", "parquet", "avro"]
    max_files_per_batch: Annotated[int, Field(gt=0)] = 1000
    #: Spark DDL of the records; None = infer (JSON/CSV) or read from the files (Parquet/Avro).
    schema_ddl: str | None = Field(default=None, alias="schema")
    #: Only file names matching this glob (e.g. ``*.json``); hidden/``_`` files are always skipped.
    glob: str | None = None
    recursive: bool = True
    #: Files older than the watermark by up to this much are still picked up (late arrivals).
    late_file_grace: Duration = Field(default="0s")
    csv_header: bool = True
    csv_delimiter: str = Field(default=",", min_length=1, max_length=1)
    #: JSON/CSV: a line longer than this goes to the error table (with its first 64 KiB)
    #: instead of being parsed: one runaway record must not exhaust an executor.
    max_record_bytes: Annotated[Size, Field(gt=0)] = 16 * 1024**2
    #: Extra Spark reader options, passed verbatim.
    options: OptionMap = {}

    model_config = StrictModel.model_config | {"populate_by_name": True}


# -- generator --------------------------------------------------------------------------


class GeneratorSourceConfig(StrictModel):
    """Deterministic synthetic trips: same (seed, batch) → same records, for demos and benchmarks."""

    type: Literal["generator"]
    seed: int = 42
    records_per_batch: Annotated[int, Field(gt=0)] = 1000
    #: Stop after this many batches (an exhausted generator returns empty batches); None = endless.
    num_batches: Annotated[int, Field(gt=0)] | None = None
    num_keys: Annotated[int, Field(gt=0)] = 100_000
    update_ratio: Annotated[float, Field(ge=0, le=1)] = 0.3
    delete_ratio: Annotated[float, Field(ge=0, le=1)] = 0.0
    partition_field: str = "city"
    partitions: list[str] = Field(default=["san_francisco", "new_york", "amsterdam"], min_length=1)
    #: Event time of batch 0 (epoch ms) and the event-time step between batches.
    start_ts_ms: int = 1_704_067_200_000  # 2024-01-01T00:00:00Z
    batch_interval: Duration = Field(default="1m")

    @model_validator(mode="after")
    def _ratios(self) -> GeneratorSourceConfig:
        if self.update_ratio + self.delete_ratio > 1:
            raise ValueError("update_ratio + delete_ratio must be at most 1")
        return self


SourceConfig = Annotated[
    KafkaSourceConfig | FilesSourceConfig | GeneratorSourceConfig, Field(discriminator="type")
]
