"""Source configs: ``source: {type: kafka|files|generator, ...}``.

The option names and defaults of every source live here and nowhere else; the
readers in the top-level ``sources`` package take these models as their only input.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from streamer.config.base import OptionMap, StrictModel
from streamer.config.units import Duration, Size

# -- kafka ------------------------------------------------------------------------------


class KafkaSecurity(StrictModel):
    """Consumer security. Maps to ``kafka.security.protocol`` / ``kafka.sasl.*`` / ``kafka.ssl.*``."""

    #: Kafka ``security.protocol`` of both the Spark consumer and the driver's librdkafka client.
    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    #: Kafka ``sasl.mechanism`` for the ``SASL_*`` protocols; None = ``PLAIN``.
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    #: SASL user; with ``sasl_password`` it builds ``sasl.jaas.config`` (Plain/Scram login module).
    #: Required with the ``SASL_*`` protocols, refused with the others.
    sasl_username: str | None = None
    #: SASL password of ``sasl_username`` (a secret: masked in logs and dumps).
    sasl_password: SecretStr | None = None
    #: Kafka ``ssl.truststore.location`` (JKS/PKCS12 of trusted CAs). Spark's Java consumer only:
    #: the driver's librdkafka client cannot read Java keystores.
    ssl_truststore_location: str | None = None
    #: Kafka ``ssl.truststore.password`` (Spark's Java consumer only).
    ssl_truststore_password: SecretStr | None = None
    #: Kafka ``ssl.keystore.location``: client certificate for mutual TLS (Spark's Java consumer only).
    ssl_keystore_location: str | None = None
    #: Kafka ``ssl.keystore.password`` (Spark's Java consumer only).
    ssl_keystore_password: SecretStr | None = None
    #: Kafka ``ssl.key.password``: the private key's password in the keystore (Spark's Java consumer only).
    ssl_key_password: SecretStr | None = None
    #: Kafka ``ssl.endpoint.identification.algorithm``; ``""`` turns broker host name
    #: verification off (``none`` for librdkafka). None = the clients' default (``https``).
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

    #: Registry base URL (``http://`` or ``https://``); HoodieStreamer's
    #: ``hoodie.streamer.schemaprovider.registry.url``.
    url: str
    #: HTTP basic-auth user (registry ``basic.auth.user.info``); None or ``""`` = no credentials.
    basic_auth_user: str | None = None
    #: HTTP basic-auth password of ``basic_auth_user``.
    basic_auth_password: SecretStr | None = None
    #: Subject whose latest schema is the reader schema; default ``<topic>-value``.
    subject: str | None = None
    #: Timeout of one registry HTTP request (whole seconds, at least 1s).
    timeout: Duration = Field(default=timedelta(seconds=10))

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


#: The column a Debezium change stream orders by, per connector: the position in the
#: database's log (HoodieStreamer's names), the pipeline's default ``ordering_field``.
DEBEZIUM_ORDERING = {"postgres": "_event_lsn", "mysql": "_event_seq"}


class KafkaSourceConfig(StrictModel):
    """A Kafka topic of JSON or Confluent-Avro records."""

    #: Source kind: a Kafka topic (HoodieStreamer's ``JsonKafkaSource``/``AvroKafkaSource``).
    type: Literal["kafka"]
    #: Kafka ``bootstrap.servers``: comma-separated ``host:port`` list of brokers.
    bootstrap_servers: str = Field(min_length=1)
    #: The one topic read (HoodieStreamer's ``hoodie.streamer.source.kafka.topic``).
    topic: str = ""
    #: Instead of ``topic``: every topic whose whole name matches this regular expression
    #: (``shop\\.public\\..*``), each into its own table (``target.path`` names it with
    #: ``{table}``), found again every ``discover_every`` while the run goes on: one
    #: pipeline for a whole database's Debezium topics (docs/kafka.md).
    topic_pattern: str | None = None
    #: With ``topic_pattern``: how often a continuous run looks for new matching topics.
    discover_every: Duration = Field(default=timedelta(seconds=30))
    #: Message value encoding: ``json`` (UTF-8 JSON, parsed with Spark's ``from_json``; on the
    #: local engine a batch of plain one-line JSON objects, with a declared ``schema`` of
    #: strings, integers, doubles and booleans, is parsed on the driver by Arrow instead, with
    #: the same result) or ``avro`` (see ``avro_wire_format``, ``schema_registry``, ``avro_schema_file``).
    format: Literal["json", "avro"] = "json"
    #: Where a pipeline with no stored position starts: earliest, latest or {partition: offset}.
    starting_offsets: StartingOffsets = "earliest"
    #: Upper bound of records per micro-batch (Spark's ``maxOffsetsPerTrigger``); None = all.
    max_records_per_batch: Annotated[int, Field(gt=0)] | None = None
    #: Spark's ``failOnDataLoss``: fail when the offsets to read were deleted (retention, topic
    #: recreated); false = skip ahead to the earliest available offset.
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
    #: Spark's consumers get ``kafka.fetch.max.wait.ms: 20`` unless set here (the client's
    #: 500 ms default idles at the end of every caught-up micro-batch).
    options: OptionMap = {}
    #: JSON: Spark DDL of the payload (``"uuid STRING, ts BIGINT"``); None = infer from a sample.
    schema_ddl: str | None = Field(default=None, alias="schema")
    #: JSON without ``schema``: infer the schema from up to this many payloads of each batch
    #: (a field first seen after them is not read); with ``debezium``, every payload is used.
    infer_sample_records: Annotated[int, Field(gt=0)] = 10_000
    #: Avro: registry to resolve schema ids (or give a fixed ``.avsc`` as ``avro_schema_file``).
    schema_registry: SchemaRegistry | None = None
    #: Avro: the ``.avsc`` reader schema (path relative to the YAML file), instead of a registry;
    #: as HoodieStreamer's ``hoodie.streamer.schemaprovider.source.schema.file``.
    avro_schema_file: str | None = None
    #: Avro framing: ``confluent`` (magic byte + schema id) or ``raw`` (bare Avro body).
    avro_wire_format: Literal["confluent", "raw"] = "confluent"
    #: Add ``_kafka_topic/_kafka_partition/_kafka_offset/_kafka_timestamp`` columns to good rows.
    include_metadata: bool = False
    #: The values are Debezium change events from this connector (``postgres`` or ``mysql``;
    #: HoodieStreamer's ``PostgresDebeziumSource``/``MysqlDebeziumSource``): each becomes the
    #: row of its ``after`` (``before`` for a delete, ``op: d``, which is written as a delete),
    #: with Debezium's source metadata as ``_change_operation_type``, ``_event_lsn``... columns.
    #: Changes order by the log position (``_event_lsn``; MySQL ``_event_seq``, binlog file
    #: and position), the table's ``ordering_field`` unless it names one. Tombstones (null
    #: values) are skipped and counted as filtered. JSON with or without embedded schemas.
    debezium: Literal["postgres", "mysql"] | None = None
    #: With ``debezium``, columns get the database's types from the Connect schema: JSON
    #: with embedded schemas (``{schema, payload}``, Kafka Connect's JsonConverter with
    #: ``schemas.enable``) is decoded by the schema each record carries (``int`` and
    #: ``bigint`` apart, ``numeric(12,2)`` as ``decimal(12,2)`` with Debezium's default
    #: ``decimal.handling.mode: precise``), and in JSON and Avro alike Debezium's named
    #: dates and timestamps (``io.debezium.time.Date``, ``MicroTimestamp``...) become dates
    #: and timestamps (docs/cdc-postgres.md). ``false``: the types the values have (JSON
    #: inferred: integers ``bigint``, dates as day numbers, decimals as base64 text; Avro
    #: its primitive types), as tables written before this setting existed have them.
    connect_types: bool = True
    #: With ``debezium: postgres``, the connector's ``unavailable.value.placeholder``: what
    #: it sends for an unchanged TOASTed value, replaced by the value before the row is
    #: written (docs/kafka.md). Set it when the connector sets it: another text would be
    #: written as data. ``hex:`` + hexadecimal gives the bytes, as Debezium reads it.
    unavailable_value_placeholder: str = "__debezium_unavailable_value"
    #: Records larger than this go to the error table instead of the table (None = no limit).
    max_record_bytes: Size | None = 8 * 1024**2
    #: Timeout for driver-side metadata calls (partitions, watermarks).
    metadata_timeout: Duration = Field(default=timedelta(seconds=30))

    model_config = StrictModel.model_config | {"populate_by_name": True}

    @property
    def commit_group_id(self) -> str:
        """The consumer group offsets are committed to (``group_id``, else one per topic)."""
        return self.group_id or f"mor-streamer-{self.topic}"

    @field_validator("unavailable_value_placeholder")
    @classmethod
    def _placeholder(cls, v: str) -> str:
        hexed = v[4:] if v.startswith("hex:") else None
        if not v or hexed == "":
            raise ValueError("unavailable_value_placeholder must not be empty")
        if hexed is not None:
            try:
                bytes.fromhex(hexed)
            except ValueError as e:
                raise ValueError(f"unavailable_value_placeholder {v!r}: not hexadecimal after 'hex:' ({e})") from e
        return v

    @field_validator("topic_pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"topic_pattern {v!r} is not a regular expression: {e}") from e
        return v

    @model_validator(mode="after")
    def _format_options(self) -> KafkaSourceConfig:
        if bool(self.topic) == (self.topic_pattern is not None):
            raise ValueError("give exactly one of topic or topic_pattern")
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

    #: Source kind: files in a folder (HoodieStreamer's ``*DFSSource``).
    type: Literal["files"]
    #: Folder to read: a local path or URI (``s3://bucket/in``, ``file:/...``); HoodieStreamer's
    #: ``hoodie.streamer.source.dfs.root``.
    path: str = Field(min_length=1)
    #: File format: ``json`` (JSON Lines, one record per line), ``csv``, ``parquet`` or ``avro``.
    format: Literal["json", "csv", "parquet", "avro"]
    #: At most this many new files per batch, oldest modification time first.
    max_files_per_batch: Annotated[int, Field(gt=0)] = 1000
    #: Spark DDL of the records; None = infer (JSON/CSV) or read from the files (Parquet/Avro).
    schema_ddl: str | None = Field(default=None, alias="schema")
    #: Only file names matching this glob (e.g. ``*.json``); hidden/``_`` files are always skipped.
    glob: str | None = None
    #: Descend into subfolders (hidden and ``_`` folders are always skipped).
    recursive: bool = True
    #: Files older than the watermark by up to this much are still picked up (late arrivals).
    late_file_grace: Duration = Field(default=timedelta(0))
    #: CSV: the first line of each file is a header (the first file's names the columns); Spark's ``header``.
    csv_header: bool = True
    #: CSV: the one-character field separator (Spark's ``sep``).
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

    #: Source kind: synthetic taxi trips (no external system; demos and benchmarks).
    type: Literal["generator"]
    #: Random seed: the same seed and batch number always give the same records.
    seed: int = 42
    #: Records in each batch (batch 0 is all inserts of new keys).
    records_per_batch: Annotated[int, Field(gt=0)] = 1000
    #: Stop after this many batches (an exhausted generator returns empty batches); None = endless.
    num_batches: Annotated[int, Field(gt=0)] | None = None
    #: Size of the key space (``trip-0000000000``...); once all keys exist, inserts become updates.
    num_keys: Annotated[int, Field(gt=0)] = 100_000
    #: Fraction of each later batch that updates keys inserted by earlier batches.
    update_ratio: Annotated[float, Field(ge=0, le=1)] = 0.3
    #: Fraction of each later batch that deletes earlier keys (``_hoodie_is_deleted: true``).
    delete_ratio: Annotated[float, Field(ge=0, le=1)] = 0.0
    #: Name of the generated partition column.
    partition_field: str = "city"
    #: Values of ``partition_field``, assigned by key (a key never changes partition).
    partitions: list[str] = Field(default=["san_francisco", "new_york", "amsterdam"], min_length=1)
    #: Event time of batch 0 (epoch ms); ``batch_interval`` is the step between batches.
    start_ts_ms: int = 1_704_067_200_000  # 2024-01-01T00:00:00Z
    #: Event-time (``ts``) step between batches, at least ``records_per_batch`` ms; not a wall-clock delay.
    batch_interval: Duration = Field(default=timedelta(minutes=1))

    @model_validator(mode="after")
    def _ratios(self) -> GeneratorSourceConfig:
        if self.update_ratio + self.delete_ratio > 1:
            raise ValueError("update_ratio + delete_ratio must be at most 1")
        return self


SourceConfig = Annotated[
    KafkaSourceConfig | FilesSourceConfig | GeneratorSourceConfig, Field(discriminator="type")
]
