"""A whole database from one pipeline: a ``topic_pattern`` source, one table per topic.

Debezium publishes each table of a database to its own topic (``shop.public.orders``).
A pipeline whose source names its topics by ``topic_pattern`` stands for all of them:
:class:`DatabaseTables` lists the matching topics and makes, for each, an ordinary
pipeline (a *child*) that reads that one topic into its own table: ``{table}`` in
``target.path`` is the topic's last segment, the record key is the table's primary key
as its message keys carry it (unless the YAML names one), and the child's name, consumer
group, error table and checkpoint folder are the parent's with the table's name added.

Each child is then a pipeline like any other, which is the point: it commits its own
position with its own table (exactly once, per table), runs its own services, and fails
alone (``streamer.pipeline.multi``), so one bad table never holds the others up. A
continuous run looks for new topics every ``source.discover_every``, so a table created
in the database mid-stream is picked up without a restart (Debezium creates its topic
with the table's first change).

A table without a primary key has no message keys: it cannot be upserted (an update
would add a second row), so it is refused by name with what to do - name its
``record_key`` under ``tables``, or leave it out with ``skip``. It is never ingested
append-only behind the user's back.
"""

from __future__ import annotations

import logging
import re

from streamer.config.pipeline import PipelineConfig
from streamer.config.target import PRIMARY_KEY
from streamer.errors import ConfigError, SourceError
from streamer.sources.kafka.topics import key_fields, matching_topics

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def table_of(topic: str) -> str:
    """The table a topic holds: its last dot-separated segment, as a Hudi table name
    (letters, digits and ``_``): ``shop.public.order-items`` -> ``order_items``."""
    name = _UNSAFE.sub("_", topic.rsplit(".", 1)[-1])
    return name if name and not name[0].isdigit() else f"t_{name}"


def child_config(parent: PipelineConfig, topic: str, record_key: list[str]) -> PipelineConfig:
    """The pipeline that reads ``topic`` into its own table, as ``parent`` says."""
    table = table_of(topic)
    override = parent.tables.get(table)
    name = f"{parent.name}-{table}"
    source = parent.source.model_copy(update={
        "topic": topic, "topic_pattern": None,
        "group_id": f"{parent.source.group_id or 'mor-streamer-' + parent.name}-{table}",  # type: ignore[union-attr]
    })
    target_update: dict[str, object] = {
        "path": parent.target.path.replace("{table}", table), "record_key": record_key, "table_name": table,
    }
    if override is not None and override.partition_by is not None:
        target_update["partition_by"] = override.partition_by
    if override is not None and override.index is not None:
        target_update["index"] = override.index
    errors = parent.errors
    if errors.path:
        errors = errors.model_copy(update={"path": f"{errors.path.rstrip('/')}/{table}"})
    checkpoint = None if parent.checkpoint_dir is None else f"{parent.checkpoint_dir.rstrip('/')}/{table}"
    return parent.model_copy(update={
        "name": name, "source": source, "target": parent.target.model_copy(update=target_update),
        "tables": {}, "errors": errors, "checkpoint_dir": checkpoint,
    })


class DatabaseTables:
    """The children of a run's ``topic_pattern`` pipelines, found now and found again."""

    def __init__(self, configs: list[PipelineConfig]) -> None:
        self.parents = [c for c in configs if c.is_pattern]
        #: (parent, topic) pairs settled: a child made, skipped or refused
        self._settled: set[tuple[str, str]] = set()

    def __bool__(self) -> bool:
        return bool(self.parents)

    @property
    def every_s(self) -> float:
        """How often a continuous run looks again: the shortest ``discover_every``."""
        return min(p.source.discover_every.total_seconds() for p in self.parents)  # type: ignore[union-attr]

    def discover(self) -> tuple[list[PipelineConfig], dict[str, BaseException]]:
        """New children since the last call, and the tables refused (by child name).

        A topic with no record yet is looked at again next time; a broker that cannot be
        listed is one refusal of the parent (the children running already go on).
        """
        new: list[PipelineConfig] = []
        refused: dict[str, BaseException] = {}
        for parent in self.parents:
            try:
                topics = matching_topics(parent.source)  # type: ignore[arg-type]
            except SourceError as e:
                refused[parent.name] = e
                continue
            for topic in topics:
                if (parent.name, topic) in self._settled:
                    continue
                child = self._child(parent, topic, refused)
                if child is not None:
                    new.append(child)
        return new, refused

    def _child(self, parent: PipelineConfig, topic: str,
               refused: dict[str, BaseException]) -> PipelineConfig | None:
        table = table_of(topic)
        override = parent.tables.get(table)
        name = f"{parent.name}-{table}"
        if override is not None and override.skip:
            self._settled.add((parent.name, topic))
            log.info("[%s] topic %s: table %s skipped (tables.%s.skip)", parent.name, topic, table, table)
            return None
        key: list[str] | None = list(override.record_key) if override and override.record_key else None
        if key is None and parent.target.record_key != [PRIMARY_KEY]:
            key = list(parent.target.record_key)
        if key is None:
            try:
                key = key_fields(parent.source, topic)  # type: ignore[arg-type]
            except SourceError as e:
                if "no record yet" in str(e):
                    return None  # Debezium made the topic before its first change: next time
                self._settled.add((parent.name, topic))
                refused[name] = e
                return None
            if key is None:
                self._settled.add((parent.name, topic))
                refused[name] = ConfigError(
                    f"table {table} (topic {topic}) has no primary key: its changes carry no message key, "
                    f"so they cannot be upserted; name its key with tables.{table}.record_key, or leave it "
                    f"out with tables.{table}.skip: true")
                return None
        self._settled.add((parent.name, topic))
        child = child_config(parent, topic, key)
        log.info("[%s] topic %s -> table %s at %s (key %s)", parent.name, topic, table, child.target.path,
                 ",".join(key), extra={"pipeline": child.name})
        return child
