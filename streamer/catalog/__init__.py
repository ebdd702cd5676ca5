"""Catalog sync: keep a Hive metastore's view of a table current after each commit.

Why: a Kafka-to-lake user finds tables by name through a catalog - Spark SQL, Trino and
Hive look ``db.trips`` up in a Hive metastore - and Apache Hudi's HoodieStreamer keeps
that catalog current with ``--enable-sync`` (its ``HiveSyncTool``). This package does the
same for our tables, writing what Hudi's Hive sync writes, so an engine cannot tell which
of the two registered the table:

- :mod:`~streamer.catalog.hive_schema` - Hive column types and Spark's schema JSON from
  the table's Arrow schema;
- :mod:`~streamer.catalog.hudi_layout` - table names, formats, serde, table and serde
  parameters, partition values: Hudi's ``HiveSyncTool`` conventions in one place;
- :mod:`~streamer.catalog.metastore` - the thrift client (connect, bounded timeouts);
- :mod:`~streamer.catalog.sync` - one incremental, idempotent sync of a table;
- :mod:`~streamer.catalog.hook` - the pipeline's after-commit hook: failures are
  reported and retried at the next commit, never fail a commit.
"""

from streamer.catalog.sync import HiveSync, SyncResult

__all__ = ["HiveSync", "SyncResult"]
