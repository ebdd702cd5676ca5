"""A Hive metastore thrift client: the calls catalog sync makes, with bounded waits.

Why a thin wrapper over ``pymetastore``'s generated bindings (the ``catalog`` extra)
rather than its high-level ``HMS`` class: sync writes tables and partitions, which that
class does not cover, and every call needs the same bounded wait and the same
translation of thrift's "no such object" into ``None``.

**The timeout bounds the whole connection, not each call.** A sync makes several calls
(database, table, partitions); a metastore that answers each just inside a per-call
timeout would hold the pipeline for several timeouts, and one that hangs would hold it
for a full one per call. Each call gets what is left of ``timeout_s`` from the
connection's start as its socket timeout, and none starts once it is spent. Table lookups use
``get_table_req`` (answered by Hive 3 and 4 metastores; Hive 4 dropped ``get_table``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from streamer.errors import ConfigError, StreamerError

if TYPE_CHECKING:  # thrift's and pymetastore's generated code has no types (Any to mypy)
    from pymetastore.hive_metastore.ThriftHiveMetastore import Client
    from pymetastore.hive_metastore.ttypes import Partition, Table
    from thrift.transport.TSocket import TSocket
    from thrift.transport.TTransport import TBufferedTransport

log = logging.getLogger(__name__)

#: The partitions fetched in one call (-1 = all); a table with more is read in full anyway.
_ALL = -1


class CatalogSyncError(StreamerError):
    """A catalog sync failed (metastore unreachable, refused a change, ...)."""


def parse_uri(uri: str) -> tuple[str, int]:
    """``thrift://host:port`` -> ``(host, port)``; a clear error naming the setting."""
    parsed = urlparse(uri)
    if parsed.scheme != "thrift" or not parsed.hostname or not parsed.port:
        raise ConfigError(f"target.catalog.uri {uri!r} must be thrift://host:port")
    return parsed.hostname, parsed.port


class _Bounded:
    """The thrift client, each call's socket timeout set to the connection's remaining budget."""

    def __init__(self, client: Client, owner: Metastore) -> None:
        self._client, self._owner = client, owner

    def __getattr__(self, name: str) -> Any:  # the generated client's attribute, untyped
        call = getattr(self._client, name)
        if not callable(call):
            return call

        def bounded(*args: object, **kwargs: object) -> Any:
            from thrift.transport.TTransport import TTransportException

            owner = self._owner
            owner._open_socket().setTimeout(owner._budget_ms(name))
            try:
                return call(*args, **kwargs)
            except (OSError, TTransportException) as e:  # timed out (or dropped): the budget's end
                raise CatalogSyncError(f"Hive metastore {owner.uri}: {name} failed within "
                                       f"target.catalog.timeout {owner.timeout_s:g}s: {e}") from e

        return bounded


def _bindings() -> tuple[ModuleType, ModuleType]:
    try:
        from pymetastore.hive_metastore import ThriftHiveMetastore, ttypes
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ConfigError("target.catalog needs the Hive metastore client: pip install "
                          "'mor-streamer[catalog]' (pymetastore)") from e
    return ThriftHiveMetastore, ttypes


class Metastore:
    """One connection to a Hive metastore (a context manager)."""

    def __init__(self, uri: str, timeout_s: float = 30.0) -> None:
        self.uri = uri
        self.host, self.port = parse_uri(uri)
        self.timeout_s = timeout_s
        self._transport: TBufferedTransport | None = None
        self._socket: TSocket | None = None
        self._deadline = 0.0
        self._client: _Bounded | None = None
        self._types: ModuleType | None = None

    @property
    def client(self) -> _Bounded:
        """The metastore's thrift client (each call bounded by the timeout); open first."""
        if self._client is None:
            raise CatalogSyncError(f"Hive metastore {self.uri}: not open (open() it or use `with`)")
        return self._client

    @property
    def types(self) -> ModuleType:
        """The metastore API's thrift types (``ttypes``); open first."""
        if self._types is None:
            raise CatalogSyncError(f"Hive metastore {self.uri}: not open (open() it or use `with`)")
        return self._types

    def _open_socket(self) -> TSocket:
        if self._socket is None:
            raise CatalogSyncError(f"Hive metastore {self.uri}: not open (open() it or use `with`)")
        return self._socket

    def open(self) -> Metastore:
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport

        service, self._types = _bindings()
        self._deadline = time.monotonic() + self.timeout_s
        self._socket = sock = TSocket.TSocket(self.host, self.port)
        sock.setTimeout(int(self.timeout_s * 1000))
        self._transport = transport = TTransport.TBufferedTransport(sock)
        try:
            transport.open()
        except TTransport.TTransportException as e:
            raise CatalogSyncError(f"Hive metastore {self.uri} unreachable: {e}") from e
        self._client = _Bounded(service.Client(TBinaryProtocol.TBinaryProtocol(transport)), self)
        return self

    def _budget_ms(self, call: str) -> int:
        """What is left of the timeout for ``call`` (ms); an error once it is spent."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise CatalogSyncError(f"Hive metastore {self.uri} timed out: {self.timeout_s:g}s spent "
                                   f"before {call} (target.catalog.timeout)")
        return max(1, int(left * 1000))

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def __enter__(self) -> Metastore:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- databases -------------------------------------------------------------------
    def database_exists(self, name: str) -> bool:
        try:
            self.client.get_database(name)
            return True
        except self.types.NoSuchObjectException:
            return False

    def create_database(self, name: str, description: str, location: str | None = None) -> None:
        # AlreadyExists: another writer created it meanwhile, which is what we wanted
        with contextlib.suppress(self.types.AlreadyExistsException):
            self.client.create_database(self.types.Database(name=name, description=description,
                                                            locationUri=location, parameters={}))

    # -- tables ----------------------------------------------------------------------
    def get_table(self, db: str, name: str) -> Table | None:
        """The thrift ``Table``, or None."""
        try:
            return self.client.get_table_req(self.types.GetTableRequest(dbName=db, tblName=name)).table
        except self.types.NoSuchObjectException:
            return None

    def create_table(self, table: Table) -> None:
        self.client.create_table(table)

    def alter_table(self, db: str, name: str, table: Table, cascade: bool) -> None:
        """``alter_table_with_environment_context``; ``cascade`` pushes new columns to the
        partitions too (Hudi sets it for partitioned tables)."""
        ctx = self.types.EnvironmentContext(properties={"CASCADE": "true"} if cascade else {})
        self.client.alter_table_with_environment_context(db, name, table, ctx)

    # -- partitions ------------------------------------------------------------------
    def partition_names(self, db: str, name: str) -> list[str]:
        """``k1=v1/k2=v2`` names (values escaped as Hive escapes path names)."""
        return list(self.client.get_partition_names(db, name, _ALL))

    def partitions(self, db: str, name: str) -> list[Partition]:
        return list(self.client.get_partitions(db, name, _ALL))

    def add_partitions(self, partitions: list[Partition]) -> None:
        """Add, skipping ones that exist (``ifNotExists``), as Hudi's HMS executor does."""
        if not partitions:
            return
        req = self.types.AddPartitionsRequest(
            dbName=partitions[0].dbName, tblName=partitions[0].tableName, parts=partitions,
            ifNotExists=True, needResult=False)
        self.client.add_partitions_req(req)
