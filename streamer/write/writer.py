"""``HudiWriter``: create/open a MOR table and commit batches to it.

One commit, in order (each step's reason in brackets), run by
:class:`~streamer.write.transaction.Transaction` with the writer's own steps (preparing,
planning and writing rows) supplied by :class:`_DeltaCommit`:

1. take the writer lock, waiting up to ``lock_timeout_s`` [a second live writer must
   wait or fail, not interleave];
2. check the batch's schema against the table's [refuse before writing anything];
3. roll back failed writes [their files must not leak into this commit's view];
4. prepare (keys, schema, combine), look keys up in the bloom index, route inserts;
   with the bucket index, hash each key to its bucket's file group instead [no lookup:
   O(batch), whatever the table's size]. The engine decides where: the local engine on
   the driver from the keys; the Spark engine runs the same steps per table partition
   on executors, once the instant is inflight (step 5), and the driver receives write
   stats [the driver never holds the batch's keys: :mod:`streamer.write.engine.spark`];
5. ``deltacommit.requested`` → ``.inflight``, markers + data files via the engine;
6. the completed instant with Hudi commit metadata, written atomically after every
   data file is durable [readers trust completed instants only]; markers dropped.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

import pyarrow as pa

from streamer import faults
from streamer.data import arrow_schema
from streamer.errors import (
    ConfigError,
    CorruptDataError,
    MissingFileError,
    StreamerError,
)
from streamer.fs import FileSystem, resolve
from streamer.index.bucket import bucket_layout, misplaced_key
from streamer.index.rfc06 import BloomParams
from streamer.integrity import read_damage
from streamer.table.avro_schema import arrow_to_avro
from streamer.table.fsview import FileSlice
from streamer.table.identity import IndexConfig, TableConfig, table_index
from streamer.table.merge import CorruptBlock
from streamer.table.metadata import SCHEMA_KEY, CommitMetadata, WriteStat
from streamer.table.naming import write_partition_metadata
from streamer.table.properties import (
    WRITABLE_VERSIONS,
    TableProperties,
    format_problems,
    load_properties,
    new_table_properties,
    properties_path,
    write_properties,
)
from streamer.table.snapshot import TableSnapshot
from streamer.write.config import WriteOptions
from streamer.write.engine import select_engine
from streamer.write.filegroup import WriteContext
from streamer.write.keygen import partition_value_column
from streamer.write.plan import SizingPolicy
from streamer.write.prepare import PrepareSpec
from streamer.write.repair import empty_clean_inflights, repair_table_format
from streamer.write.requirements import ExpectCheckpoint, ExpectIndex, ExpectSchema
from streamer.write.result import CommitResult
from streamer.write.schema import META_COLUMNS, data_schema
from streamer.write.state import TableState
from streamer.write.tagging import Planned, PlanRequest
from streamer.write.transaction import Requirement, Transaction

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations only

OPERATIONS = {
    "upsert": "UPSERT",
    "insert": "INSERT",
    "delete": "DELETE",
    "bulk_insert": "BULK_INSERT",
}


_incoming_arrow_schema = arrow_schema


class CommitOptions(TypedDict, total=False):
    """The options every write operation takes, declared once for all four (what
    :meth:`HudiWriter._write` accepts, keyword only)."""

    #: Extra key/values for the commit metadata (e.g. a source checkpoint).
    extra_metadata: Mapping[str, str] | None
    #: The engine's name; absent: ``WriteOptions.engine`` (``auto``: decided from the data).
    engine: str | None
    #: Commit only if the table's newest checkpoint is still the one the batch resumed from.
    expect_checkpoint: ExpectCheckpoint | None


class HudiWriter:
    """Writes one Hudi MOR table (version 6, 8 or 9). Use :meth:`create` or :meth:`open`."""

    def __init__(
        self, fs: FileSystem, base_path: str, config: TableConfig, options: WriteOptions
    ) -> None:
        self.fs = fs
        self.base_path = base_path.rstrip("/")
        self.config = config
        self.options = options
        self._snapshot: TableSnapshot | None = None

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def create(
        cls,
        path: str,
        config: TableConfig,
        *,
        schema: pa.Schema | None = None,
        options: WriteOptions | None = None,
        fs: FileSystem | None = None,
    ) -> HudiWriter:
        """Create the table (``hoodie.properties`` + timeline folder); fails if one exists."""
        if fs is None:
            fs, path = resolve(path)
        if fs.exists(properties_path(path)):
            raise ConfigError(f"a Hudi table already exists at {path}")
        create_schema = None
        if schema is not None:
            ds = data_schema(schema)
            create_schema = json.dumps(
                arrow_to_avro(
                    ds, f"{config.name}_record", f"hoodie.{config.name}", null_first=False
                ),
                separators=(",", ":"),
            )
        props = new_table_properties(
            config.name,
            record_key_fields=config.record_key_fields,
            partition_fields=config.partition_fields,
            precombine_field=config.ordering_field,
            database=config.database,
            hive_style_partitioning=config.hive_style_partitioning,
            keygen_class=config.keygen.value,
            create_schema=create_schema,
            extra=config.extra_properties(),
            version=config.table_version,
            event_time=False if config.latest_write_wins else None,
        )
        fs.mkdirs(f"{path}/.hoodie/.temp")
        # layout 1 archives into .hoodie/archived; layout 2 keeps an LSM history in the
        # timeline folder (streamer.table.lsm_history)
        fs.mkdirs(f"{path}/.hoodie/archived" if props.timeline_layout_version < 2
                  else f"{path}/.hoodie/{props.timeline_path}/history")
        write_properties(fs, path, props)
        return cls(fs, path, config, options or WriteOptions())

    @classmethod
    def open(
        cls,
        path: str,
        *,
        options: WriteOptions | None = None,
        fs: FileSystem | None = None,
        index: IndexConfig | None = None,
    ) -> HudiWriter:
        """Open an existing table. ``index``: the index the caller means to write with - the
        table's own, or a bucket index for a table that records none but is laid out by
        it (see :meth:`_use_index`); any other is refused, naming both."""
        if fs is None:
            fs, path = resolve(path)
        props = load_properties(fs, path)
        if not props.is_mor:
            raise ConfigError(
                f"{path} is a {props.table_type} table; this writer writes MERGE_ON_READ"
            )
        if props.version not in WRITABLE_VERSIONS or props.timeline_layout_version != (1 if props.version < 8 else 2):
            raise ConfigError(
                f"{path} is table version {props.version} (layout {props.timeline_layout_version});"
                f" this writer writes versions {', '.join(map(str, WRITABLE_VERSIONS))}"
                " (version 6 on layout 1, 8 and 9 on layout 2)"
            )
        if props.unsupported_merge:
            raise ConfigError(f"{path}: {props.unsupported_merge}: this writer merges records by event "
                              "time or commit time only")
        writer = cls(fs, path, TableConfig.from_properties(props.raw), options or WriteOptions())
        if format_problems(props) or empty_clean_inflights(fs, path):
            # a table of an earlier version of this project: Apache Hudi cannot see its
            # logs, or its archiver fails on an empty clean inflight file
            repair_table_format(fs, path, lock_timeout_s=writer.options.lock_timeout_s)
        if index is not None:
            writer._use_index(index)
        return writer

    def _use_index(self, index: IndexConfig) -> None:
        """Write with ``index``: the table's recorded index, or - for a table that records
        none - a bucket index its layout already follows, which is then recorded.

        Hudi keeps its index in writer configs, so a bucket-index table Hudi created (or
        an empty one) records nothing; adopting it checks every file group's id (one
        group per bucket, below ``num_buckets``) and every key's bucket, once.
        """
        wanted = self.config.with_changes(index=index)  # hash fields default, validated
        have = self.config.index
        if wanted.index == have:
            return
        if have.is_bucket or not wanted.index.is_bucket:
            wanted.index.check_same(have, self.base_path)
        n, fields = wanted.index.bucket_count, wanted.index.hash_fields  # a bucket index from here
        with self._transaction():
            state = TableState.load(self.fs, self.base_path)
            recorded = table_index(state.props.raw)
            if recorded != have:  # another writer recorded one meanwhile
                wanted.index.check_same(recorded, self.base_path)
                self.config = wanted
                return
            refusal = (f"the table at {self.base_path} records no index and is not laid out by "
                       f"{wanted.index.describe()}, so it cannot adopt it")
            try:
                bucket_layout(((s.partition_path, s.file_id) for s in state.slices), n, self.base_path)
            except StreamerError as e:
                raise ConfigError(f"{refusal}: {e}") from e
            bad = misplaced_key(self.fs, state.slices, state.is_committed(), n, fields)
            if bad is not None:
                raise ConfigError(f"{refusal}: key {bad[2]!r} in file group {bad[1]} of partition "
                                  f"{bad[0]!r} belongs to another bucket")
            props = TableProperties({**state.props.raw, **wanted.index.properties()})
            write_properties(self.fs, self.base_path, props)
        self.config = wanted

    # ------------------------------------------------------------------ operations
    def upsert(self, data: Any, **options: Unpack[CommitOptions]) -> CommitResult:
        """Insert new keys, update existing ones (last ordering value wins in the batch)."""
        return self._write("upsert", data, **options)

    def insert(self, data: Any, **options: Unpack[CommitOptions]) -> CommitResult:
        """Insert without an index lookup (Hudi's ``insert``: faster; a key that already
        exists in the table is written again, so use upsert for updates)."""
        return self._write("insert", data, **options)

    def delete(self, data: Any, **options: Unpack[CommitOptions]) -> CommitResult:
        """Delete the keys in ``data`` (needs the record key and partition fields)."""
        return self._write("delete", data, **options)

    def bulk_insert(self, data: Any, **options: Unpack[CommitOptions]) -> CommitResult:
        """Load data into new file groups only (sorted by partition and key, no lookup)."""
        return self._write("bulk_insert", data, **options)

    # ------------------------------------------------------------------ the commit
    def _write(
        self,
        op: str,
        data: Any,
        *,
        extra_metadata: Mapping[str, str] | None = None,
        engine: str | None = None,
        expect_checkpoint: ExpectCheckpoint | None = None,
    ) -> CommitResult:
        """One delta commit of ``data``, through the table's :class:`Transaction`."""
        started = time.monotonic()
        cfg = self.config
        wanted = engine or self.options.engine
        if cfg.index.is_global:  # every key is looked up in every partition: on the driver
            if wanted == "spark":
                raise ConfigError(f"{self.base_path}: the global_bloom index plans on the driver; "
                                  "write with engine local or auto, not spark")
            wanted = "local"
        chosen = select_engine(wanted, data, self.options)
        required = tuple(cfg.record_key_fields) + tuple(cfg.partition_fields)
        if op != "delete" and cfg.ordering_field:
            required += (cfg.ordering_field,)
        schema = ExpectSchema(_incoming_arrow_schema(data), required, delete=(op == "delete"))
        expected = () if expect_checkpoint is None else (expect_checkpoint,)
        requirements: tuple[Requirement, ...] = (*expected, ExpectIndex(cfg.index), schema)
        work = _DeltaCommit(self, op, data, chosen, schema, requirements, dict(extra_metadata or {}))
        with self._transaction() as tx:
            result = tx.commit(work, self._snapshot, started=started)
        self._snapshot = result.snapshot
        return result

    # ------------------------------------------------------------------ helpers
    @property
    def snapshot(self) -> TableSnapshot | None:
        """The table as this writer last committed it (``None`` before its first commit)."""
        return self._snapshot

    def _avro_schema(self, schema: pa.Schema, with_meta: bool) -> str:
        if with_meta:
            schema = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + list(schema))
        name = self.config.name
        return json.dumps(
            arrow_to_avro(schema, f"{name}_record", f"hoodie.{name}"), separators=(",", ":")
        )

    def _context(self, state: TableState, instant: str, schema: pa.Schema) -> WriteContext:
        o = self.options
        return WriteContext(
            fs=self.fs,
            base_path=self.base_path,
            instant=instant,
            data_schema=schema,
            writer_avro_schema=self._avro_schema(schema, with_meta=True),
            block_format=self.config.log_block_format,
            bloom=BloomParams(
                o.bloom_num_entries,
                o.bloom_fpp,
                o.bloom_max_entries,
                o.slice_bloom_num_entries,
                o.slice_bloom_fpp,
                o.slice_bloom_max_entries,
            ),
            ordering_field=self.config.ordering_field,
            completed=state.completed,
            first_active=state.first_active,
            codec=o.parquet_codec,
            log_block_max_size=o.log_block_max_size,
            log_per_instant=state.props.version >= 8,
            block_filters=not self.config.index.is_bucket,
            partition_value_column=partition_value_column(self.config, schema),
        )

    def _transaction(self) -> Transaction:
        """A commit holding the table's writers' lock, waited for up to ``options.lock_timeout_s``."""
        o = self.options
        return Transaction(self.fs, self.base_path, timeout_s=o.lock_timeout_s, expiry_s=o.heartbeat_expiry_s)

    def rollback_failed_writes(self) -> list:
        """Roll back dead writers' pending commits now (normally done by the next write)."""
        with self._transaction() as tx:
            return tx.rollback_failed_writes(TableState.load(self.fs, self.base_path).timeline)


class _DeltaCommit:
    """The writer's part of one delta commit (:class:`~streamer.write.transaction.DeltaWork`):
    prepare the rows, plan where they go, write them; the transaction does the rest."""

    def __init__(self, writer: HudiWriter, op: str, data: Any, engine: Any, schema: ExpectSchema,
                 requirements: tuple[Requirement, ...], extra: dict[str, str]) -> None:
        self.writer, self.op, self.data, self.engine = writer, op, data, engine
        self.schema_requirement = schema
        self.requirements = requirements
        self.extra = extra
        self.operation = OPERATIONS[op]
        self.engine_name: str = engine.name
        self.input_rows = 0
        self.decision_schema: pa.Schema | None = None
        self.prepared: Any = None

    def prepare(self, state: TableState) -> TableState:
        """Keys, schema, combine; for an upsert or delete through the bloom index, a state
        whose committed files are all present (see :func:`_intact`)."""
        w = self.writer
        self.decision_schema = self.schema_requirement.decide(state.latest_schema())
        spec = PrepareSpec(w.config, self.decision_schema, all_deletes=(self.op == "delete"))
        combine = self.op in ("upsert", "delete") or w.options.combine_before_insert
        self.prepared = self.engine.prepare(self.data, spec, combine)
        self.input_rows = self.prepared.input_rows
        if self.op in ("upsert", "delete") and not w.config.index.is_bucket:
            return _intact(state)
        return state

    def plan(self, state: TableState, instant: str) -> Planned:
        """Look keys up and route them (the engine decides where: see the module doc)."""
        w = self.writer
        o, index_cfg = w.options, w.config.index
        sizing = SizingPolicy(
            o.small_file_limit,
            o.max_file_size,
            # the bucket index never sizes files (the bucket count fixes the groups):
            # no reading of recent commits' metadata for it
            o.default_record_size if index_cfg.is_bucket else state.avg_record_size(o.default_record_size),
            use_small_files=(self.op != "bulk_insert"),
        )
        request = PlanRequest(
            op=self.op, index=index_cfg, fs=w.fs, base_path=w.base_path,
            slices=state.slices, log_versions=state.log_versions,
            append_to=state.append_slices, is_committed=state.is_committed(),
            on_corrupt=_refuse_corrupt(state), instant=instant, sizing=sizing,
            parallelism=o.parallelism, ordering_field=w.config.combine_field,
            clustering=frozenset(state.fsview.pending_clustering_file_groups()),
        )
        return self.engine.plan(self.prepared, request)

    def write(self, state: TableState, instant: str, planned: Planned) -> list[WriteStat]:
        """Partition metadata of new partitions, then markers and data files via the engine."""
        w, plan = self.writer, planned.plan
        assert self.decision_schema is not None
        for part in plan.new_partitions:
            write_partition_metadata(w.fs, w.base_path, part, instant)
            faults.step(f"partition metadata {part}")
        ctx = w._context(state, instant, self.decision_schema)
        if planned.seeds and self.engine.name == "local":
            # the driver's parsed slice summaries, reused in-process only
            ctx = dataclasses.replace(ctx, slice_seeds=planned.seeds)
        # a plan decided where the rows are (Spark) has no tasks on the driver yet
        deferred = plan.assignment is None and plan.rows is not None
        stats = self.engine.write(self.prepared, plan, ctx) if plan.tasks or deferred else []
        self.input_rows = self.prepared.input_rows  # the Spark engine counts them while it writes
        return stats

    def metadata(self, stats: list[WriteStat]) -> CommitMetadata:
        """Hudi's commit metadata: write stats in a stable order, extra metadata and schema."""
        assert self.decision_schema is not None
        meta = CommitMetadata(operation_type=self.operation)
        for s in sorted(stats, key=lambda s: (s.partition_path or "", s.file_id)):
            meta.add(s)
        meta.extra_metadata = dict(self.extra)
        meta.extra_metadata[SCHEMA_KEY] = self.writer._avro_schema(self.decision_schema, with_meta=False)
        return meta

    def release(self) -> None:
        if self.prepared is not None:
            self.prepared.release()


def _intact(state: TableState) -> TableState:
    """``state``, or a fresh one, in which every file completed instants wrote into a live
    slice is present - else :class:`MissingFileError` naming it.

    A key in a lost file would be tagged an insert and land in a second file group. One
    re-listing first: a cleaner may have removed a slice that a compaction, completed
    after this state was read, superseded.
    """
    try:
        state.fsview.check_committed_files()
        return state
    except MissingFileError:
        fresh = TableState.load(state.fs, state.base_path)
        fresh.fsview.check_committed_files()
        return fresh


def _refuse_corrupt(state: TableState) -> Callable[[FileSlice, list[CorruptBlock]], None]:
    """The index's ``on_corrupt``: a corrupt block inside committed bytes stops the write
    (its keys cannot be looked up); a torn tail no instant committed is skipped."""

    def check(fslice: FileSlice, corrupt: list[CorruptBlock]) -> None:
        damage = read_damage(state.fsview, state.timeline, None, corrupt)
        if damage:
            raise CorruptDataError(
                f"write refused: {damage[0]}; the keys of that block cannot be looked up, so updates "
                f"to them would become duplicates - restore the file first (`streamer check {state.base_path}`)")

    return check
