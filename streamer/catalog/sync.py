"""One Hive sync of a table: create what is missing, change what changed, nothing else.

Why incremental: a pipeline syncs after every commit, so a sync must cost a few metastore
calls, not a listing of the table. As Hudi's ``HiveSyncTool``: the metastore table keeps
``last_commit_time_sync``; the next sync adds only the partitions that commits after it
wrote (read from their commit metadata), and lists every partition on storage only for a
new table or when that instant is older than the active timeline. The schema is compared
with the metastore's columns and, when it differs (a new column), the table is altered
(cascading to its partitions). Running it twice changes nothing the second time
(idempotent): partitions are added with ``ifNotExists``, and a table created meanwhile by
another writer is altered rather than created again.

What is registered is :mod:`streamer.catalog.hudi_layout`'s; the schema is
:mod:`streamer.catalog.hive_schema`'s.
"""

from __future__ import annotations

import copy
import getpass
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pyarrow as pa

from streamer.catalog import hudi_layout as hl
from streamer.catalog.hive_schema import hive_columns, partition_columns, spark_schema_json
from streamer.catalog.metastore import CatalogSyncError, Metastore
from streamer.config.target import HiveCatalogConfig
from streamer.table.meta_fields import META_COLUMNS
from streamer.table.snapshot import TableSnapshot
from streamer.table.table_keys import KEYGEN_CLASS, KEYGEN_TYPE

if TYPE_CHECKING:  # pymetastore's generated thrift types (untyped: Any to mypy)
    from pymetastore.hive_metastore.ttypes import Table

log = logging.getLogger(__name__)

#: Hudi's description of a database its sync creates.
_DB_DESCRIPTION = "automatically created by hoodie"


@dataclass(frozen=True)
class SyncResult:
    """What one sync changed in the metastore."""

    database: str
    tables: tuple[str, ...]
    created: tuple[str, ...] = ()
    altered: tuple[str, ...] = ()  # schema or parameters changed
    partitions_added: int = 0  # per table, summed
    last_commit: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.created or self.altered or self.partitions_added)

    def line(self) -> str:
        what = [
            f"{verb} {', '.join(tables)}"
            for verb, tables in (("created", self.created), ("altered", self.altered))
            if tables
        ]
        if self.partitions_added:
            what.append(f"{self.partitions_added} partition(s) added")
        names = ", ".join(f"{self.database}.{t}" for t in self.tables)
        return f"hive sync {names} at {self.last_commit}: {'; '.join(what) or 'up to date'}"


@dataclass(frozen=True)
class _TableState:
    """What the metastore should hold for the table, computed once per sync."""

    base_uri: str
    schema: pa.Schema
    partition_fields: list[str]
    columns: list[tuple[str, str]]
    partition_keys: list[tuple[str, str]]
    decode: bool
    last_commit: str | None


def sync_schema(snapshot: TableSnapshot) -> pa.Schema | None:
    """The table schema Hudi's sync registers: the latest commit's writer schema, meta
    columns first when the table populates them (Hudi reads a data file's schema, which
    has them)."""
    data = snapshot.latest_schema()
    if data is None:
        return None
    fields = [f for f in data if f.name not in META_COLUMNS]
    if snapshot.properties.populate_meta_fields:
        fields = [pa.field(c, pa.string()) for c in META_COLUMNS] + fields
    return pa.schema(fields)


class HiveSync:
    """Syncs one table to the metastore named by its ``target.catalog``."""

    def __init__(self, config: HiveCatalogConfig, table_name: str, table_path: str) -> None:
        """``table_path``: the table's path or URI as the user gave it (the location
        registered, see :func:`~streamer.catalog.hudi_layout.location_uri`)."""
        self.config = config
        self.location = hl.location_uri(table_path)
        self.table_name = config.table or table_name
        self.specs = hl.table_specs(self.table_name, skip_ro_suffix=config.skip_ro_suffix,
                                    snapshot_with_table_name=config.snapshot_with_table_name)

    @property
    def table_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    def sync(self, snapshot: TableSnapshot) -> SyncResult:
        """Bring the metastore up to ``snapshot``; raises :class:`CatalogSyncError`."""
        state = self._state(snapshot)
        db = self.config.database
        try:
            with Metastore(self.config.uri, self.config.timeout.total_seconds()) as ms:
                if not ms.database_exists(db):
                    ms.create_database(db, _DB_DESCRIPTION)
                created, altered, added = [], [], 0
                for spec in self.specs:
                    c, a, n = self._sync_table(ms, spec, snapshot, state)
                    if c:
                        created.append(spec.name)
                    if a:
                        altered.append(spec.name)
                    added += n
        except Exception as e:  # thrift and metastore exceptions: one error naming the table
            what = str(e) if isinstance(e, CatalogSyncError) else f"{type(e).__name__}: {_message(e)}"
            raise CatalogSyncError(f"hive sync of {db}.{self.table_name} to {self.config.uri} failed: "
                                   f"{what}") from e
        return SyncResult(db, self.table_names, tuple(created), tuple(altered), added, state.last_commit)

    # ------------------------------------------------------------------ the desired state
    def _state(self, snapshot: TableSnapshot) -> _TableState:
        props = snapshot.properties
        if not props.is_mor:
            raise CatalogSyncError(f"hive sync: {snapshot.base_path} is a {props.table_type} table; "
                                   "only MERGE_ON_READ tables are synced")
        schema = sync_schema(snapshot)
        if schema is None:
            raise CatalogSyncError(f"hive sync: {snapshot.base_path} has no schema yet (no commit)")
        fields = list(props.partition_fields)
        keygen = (props.get(KEYGEN_CLASS) or "") + (props.get(KEYGEN_TYPE) or "")
        # a formatted timestamp path is not the field's value: string partition columns
        typed = "timestamp" not in keygen.lower()
        ts = self.config.support_timestamp
        last = snapshot.timeline.last_completed_write()
        return _TableState(
            base_uri=self.location,
            schema=schema,
            partition_fields=fields,
            columns=hive_columns(schema, fields, ts),
            partition_keys=partition_columns(schema, fields, typed, ts),
            decode=props.url_encode_partitioning,
            last_commit=last.timestamp if last else None,
        )

    def _parameters(self, spec: hl.HiveTableSpec, state: _TableState) -> tuple[dict[str, str], dict[str, str]]:
        """``(table parameters, serde parameters)`` the table must carry."""
        cfg = self.config
        table = dict(cfg.table_properties)
        serde = dict(cfg.serde_properties)
        if cfg.sync_as_datasource:
            meta = hl.source_options(state.base_uri, spec) if cfg.spark_source_options else {}
            schema_json = spark_schema_json(state.schema, state.partition_fields, meta)
            table.update(hl.spark_table_parameters(schema_json, state.partition_fields,
                                                   cfg.schema_string_length_threshold, cfg.spark_version))
            serde.update(hl.spark_serde_parameters(state.base_uri, spec.read_optimized))
        return table, serde

    # ------------------------------------------------------------------ one metastore table
    def _sync_table(self, ms: Metastore, spec: hl.HiveTableSpec, snapshot: TableSnapshot,
                    state: _TableState) -> tuple[bool, bool, int]:
        db = self.config.database
        t = ms.types
        table_params, serde_params = self._parameters(spec, state)
        existing = ms.get_table(db, spec.name)
        created = altered = False
        if existing is None:
            serde_params["serialization.format"] = "1"
            sd = t.StorageDescriptor(
                cols=[t.FieldSchema(n, ty, "") for n, ty in state.columns],
                location=state.base_uri, inputFormat=spec.input_format, outputFormat=hl.OUTPUT_FORMAT,
                compressed=False, numBuckets=-1,
                serdeInfo=t.SerDeInfo(name=None, serializationLib=hl.SERDE, parameters=serde_params),
                bucketCols=[], sortCols=[], parameters={})
            table = t.Table(
                tableName=spec.name, dbName=db, owner=_owner(), createTime=int(time.time()),
                lastAccessTime=0, retention=0, sd=sd,
                partitionKeys=[t.FieldSchema(n, ty, "") for n, ty in state.partition_keys],
                parameters={"EXTERNAL": "TRUE", **table_params}, tableType="EXTERNAL_TABLE")
            try:
                ms.create_table(table)
                created = True
                log.info("hive sync: created %s.%s (%s) at %s", db, spec.name, spec.input_format, state.base_uri)
            except t.AlreadyExistsException:
                pass  # created meanwhile by another writer: altered below like any existing table
            existing = ms.get_table(db, spec.name)
            last_synced = None
        else:
            last_synced = (existing.parameters or {}).get(hl.LAST_COMMIT_TIME_SYNC)
            altered = self._update_definition(ms, spec, existing, state, table_params, serde_params)
            if altered:
                existing = ms.get_table(db, spec.name)
        if existing is None:
            raise CatalogSyncError(f"hive sync of {db}.{spec.name}: the table vanished from the "
                                   "metastore during the sync (dropped meanwhile?)")
        added = self._sync_partitions(ms, spec, existing, snapshot, state, last_synced)
        if state.last_commit and (existing.parameters or {}).get(hl.LAST_COMMIT_TIME_SYNC) != state.last_commit:
            existing.parameters = {**(existing.parameters or {}), hl.LAST_COMMIT_TIME_SYNC: state.last_commit}
            ms.alter_table(db, spec.name, existing, cascade=False)
        return created, altered, added

    def _update_definition(self, ms: Metastore, spec: hl.HiveTableSpec, existing: Table, state: _TableState,
                           table_params: dict[str, str], serde_params: dict[str, str]) -> bool:
        """Columns, formats and parameters brought to what they must be; True if changed."""
        t = ms.types
        sd = existing.sd
        have_cols = [(c.name.lower(), c.type.lower()) for c in sd.cols or []]
        want_cols = [(n.lower(), ty.lower()) for n, ty in state.columns]
        schema_changed = have_cols != want_cols
        params = dict(existing.parameters or {})
        # stale schema parts of a longer schema string would be read back as part of it
        stale = [k for k in params if k.startswith(hl.SPARK_SCHEMA_PART) and k not in table_params]
        params_changed = bool(stale) or any(params.get(k) != v for k, v in table_params.items())
        serde = dict(sd.serdeInfo.parameters or {}) if sd.serdeInfo else {}
        serde_changed = any(serde.get(k) != v for k, v in serde_params.items())
        format_changed = sd.inputFormat != spec.input_format or sd.location != state.base_uri
        if not (schema_changed or params_changed or serde_changed or format_changed):
            return False
        if schema_changed:
            sd.cols = [t.FieldSchema(n, ty, "") for n, ty in state.columns]
            log.info("hive sync: schema of %s.%s changed: %s -> %s", self.config.database, spec.name,
                     have_cols, want_cols)
        for k in stale:
            params.pop(k)
        params.update(table_params)
        existing.parameters = params
        serde.update(serde_params)
        if sd.serdeInfo is None:
            sd.serdeInfo = t.SerDeInfo(name=None, serializationLib=hl.SERDE, parameters=serde)
        sd.serdeInfo.parameters = serde
        sd.inputFormat = spec.input_format
        sd.location = state.base_uri
        ms.alter_table(self.config.database, spec.name, existing,
                       cascade=schema_changed and bool(state.partition_fields))
        return True

    def _sync_partitions(self, ms: Metastore, spec: hl.HiveTableSpec, table: Table, snapshot: TableSnapshot,
                         state: _TableState, last_synced: str | None) -> int:
        fields = state.partition_fields
        if not fields:
            return 0
        candidates = _partitions_since(snapshot, last_synced)
        if not candidates:
            return 0
        have = {tuple(_name_values(n)) for n in ms.partition_names(self.config.database, spec.name)}
        new = []
        for path in sorted(candidates):
            try:
                values = hl.partition_values(path, fields, decode=state.decode)
            except ValueError as e:
                raise CatalogSyncError(f"hive sync of {self.config.database}.{spec.name}: {e}") from None
            if tuple(values) in have:
                continue
            sd = copy.deepcopy(table.sd)
            sd.location = hl.partition_location(state.base_uri, path)
            new.append(ms.types.Partition(values=values, dbName=self.config.database, tableName=spec.name,
                                          createTime=0, lastAccessTime=0, sd=sd, parameters={}))
        ms.add_partitions(new)
        if new:
            log.info("hive sync: %d partition(s) added to %s.%s", len(new), self.config.database, spec.name)
        return len(new)


def _partitions_since(snapshot: TableSnapshot, last_synced: str | None) -> set[str]:
    """Partition paths written by completed writes after ``last_synced``; every partition on
    storage when there is no such instant or it is older than the active timeline (its
    successors may be archived: their metadata is gone)."""
    writes = snapshot.timeline.completed_writes()
    if last_synced is None or not writes or last_synced < writes[0].timestamp:
        return {p for p in snapshot.fsview.partitions() if p}
    out: set[str] = set()
    for inst in writes:
        if inst.timestamp > last_synced:
            out.update(p for p in snapshot.commit_metadata(inst).partition_to_write_stats if p)
    return out


def _name_values(name: str) -> list[str]:
    """Values of a metastore partition name ``k1=v1/k2=v2`` (Hive escapes them as %XX)."""
    return [unquote(part.split("=", 1)[1]) for part in name.split("/")]


def _owner() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in this environment
        return "mor-streamer"


def _message(e: Exception) -> str:
    return getattr(e, "message", None) or str(e) or repr(e)
