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


def listed_children(parent: PipelineConfig) -> list[PipelineConfig]:
    """``parent``'s children for the topics the broker lists now (``tables.<name>.skip``
    left out), for what needs their tables but not their keys (``streamer sync``): the
    record key is the parent's as written, not each table's primary key."""
    out = []
    for topic in matching_topics(parent.source):  # type: ignore[arg-type]
        override = parent.tables.get(table_of(topic))
        if override is None or not override.skip:
            out.append(child_config(parent, topic, list(parent.target.record_key)))
    return out


def select(configs: list[PipelineConfig], names: list[str], *, source: str
           ) -> tuple[list[PipelineConfig], frozenset[str] | None]:
    """The pipelines ``--pipeline NAME`` picks, and the children it picks by name.

    A name is a pipeline of the file, or a child of a ``topic_pattern`` pipeline (its name,
    ``-``, the table: ``shop-orders``), which keeps its parent and only that child (the
    children are only known once the broker is listed). Returns the pipelines to run and
    the children's names to make (``None``: every child). An unknown name is refused with
    the names there are (``source``: the file, for the message).
    """
    names_there = {c.name for c in configs}
    parents = [c for c in configs if c.is_pattern]
    keep: set[str] = set()
    only: set[str] = set()
    unknown: list[str] = []
    for name in dict.fromkeys(names):
        if name in names_there:
            keep.add(name)
            only.add(f"{name}-*")  # a parent by its own name: all its children
            continue
        parent = _parent_of(name, parents)
        if parent is None:
            unknown.append(name)
        else:
            keep.add(parent.name)
            only.add(name)
    if unknown:
        have = sorted(names_there) + sorted(f"{p.name}-<table>" for p in parents)
        raise ConfigError(f"{source}: no pipeline named {', '.join(unknown)} (have: {', '.join(have)})")
    children_named = any(not n.endswith("-*") for n in only)
    return [c for c in configs if c.name in keep], frozenset(only) if children_named else None


def _parent_of(child: str, parents: list[PipelineConfig]) -> PipelineConfig | None:
    """The ``topic_pattern`` pipeline whose child ``child`` would be (the longest name
    that prefixes it: ``shop-eu-orders`` is ``shop-eu``'s when both exist)."""
    fits = [p for p in parents if child.startswith(f"{p.name}-") and len(child) > len(p.name) + 1]
    return max(fits, key=lambda p: len(p.name), default=None)


class DatabaseTables:
    """The children of a run's ``topic_pattern`` pipelines, found now and found again.

    ``only``: the children to make (by name; ``PARENT-*`` for all of a parent's), from
    :func:`select`; ``None``, all. ``waits``: the parents whose run goes on (continuous;
    by default those whose trigger says so), which look for new tables again and wait for
    a named child's topic to appear; a named child whose parent does not wait and has no
    topic for it is refused on the first look, by name.
    """

    def __init__(self, configs: list[PipelineConfig], *, only: frozenset[str] | None = None,
                 waits: frozenset[str] | None = None) -> None:
        self.parents = [c for c in configs if c.is_pattern]
        self.only = only
        self.waits = frozenset(p.name for p in self.parents if p.trigger.mode == "continuous") if waits is None else waits
        #: (parent, topic) pairs settled: a child made, skipped or refused
        self._settled: set[tuple[str, str]] = set()
        #: (parent, table) -> the topic whose child writes that table
        self._claimed: dict[tuple[str, str], str] = {}
        #: named children still looked for, by parent (reported once when missing)
        self._looked_for: dict[str, set[str]] = {}
        for name in only or ():
            parent = _parent_of(name, self.parents)
            if parent is not None and not name.endswith("-*"):
                self._looked_for.setdefault(parent.name, set()).add(name)

    def _wanted(self, parent: PipelineConfig, name: str) -> bool:
        return self.only is None or name in self.only or f"{parent.name}-*" in self.only

    def __bool__(self) -> bool:
        return bool(self.parents)

    @property
    def goes_on(self) -> bool:
        """Whether discovery goes on while the run does: a parent runs continuously."""
        return bool(self.waits)

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
                name = f"{parent.name}-{table_of(topic)}"
                if not self._wanted(parent, name):
                    self._settled.add((parent.name, topic))  # not asked for by --pipeline
                    continue
                self._looked_for.get(parent.name, set()).discard(name)
                if self._clashes(parent, topic, topics, refused):
                    continue
                child = self._child(parent, topic, refused)
                if child is not None:
                    self._claimed[(parent.name, table_of(topic))] = topic
                    new.append(child)
            self._missing(parent, topics, refused)
        return new, refused

    def _clashes(self, parent: PipelineConfig, topic: str, topics: list[str],
                 refused: dict[str, BaseException]) -> bool:
        """Whether another topic holds the same table name as ``topic`` (``a.b`` and ``b``,
        ``order-items`` and ``order_items``, one table in two schemas): then it is refused,
        naming both, rather than two tables written into one (the second's rows would be
        upserted into the first's, or its run refused as the first's twin). A table whose
        child runs already keeps it."""
        table = table_of(topic)
        override = parent.tables.get(table)
        if override is not None and override.skip:
            return False  # left out either way (_child logs it)
        claimed = self._claimed.get((parent.name, table))
        others = [t for t in topics if t != topic and table_of(t) == table] if claimed is None else [claimed]
        if not others or claimed == topic:
            return False
        self._settled.add((parent.name, topic))
        named = ", ".join(sorted({topic, *others}))
        refused[f"{parent.name}-{table}"] = ConfigError(
            f"topics {named} all hold table {table} (a table is named by its topic's last segment, "
            f"as a Hudi table name): narrow {parent.name}'s source.topic_pattern so that one of them matches")
        return True

    def _missing(self, parent: PipelineConfig, topics: list[str], refused: dict[str, BaseException]) -> None:
        """Named children of ``parent`` with no topic: refused unless ``parent`` waits."""
        for name in sorted(self._looked_for.pop(parent.name, ())):
            table = name[len(parent.name) + 1:]
            if parent.name in self.waits:
                log.info("[%s] waiting for a topic of table %s (pipeline %s)", parent.name, table, name)
                continue
            tables = ", ".join(sorted({table_of(t) for t in topics})) or "none"
            refused[name] = ConfigError(
                f"no topic matching {parent.name}'s topic_pattern holds table {table} (its tables: {tables})")

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
