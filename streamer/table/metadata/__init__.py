"""What a completed instant says: commit metadata and the Avro plans/metadata files.

Table version 6 stores commit metadata as pretty JSON (Jackson); versions 8+ store the
same fields as an Avro container. Plans (compaction, log compaction, clean, rollback) and
rollback/clean metadata are Avro containers in every version. Split by kind:

- :mod:`.codec` - the one camelCase codec: our snake_case fields <-> Hudi's camelCase keys
- :mod:`.avro` - single-record Avro container files and shared schema pieces
- :mod:`.commit` - ``WriteStat``, ``CommitMetadata`` (JSON and v8 Avro)
- :mod:`.archive` - commit metadata as an archived timeline entry carries it (Avro)
- :mod:`.compaction` - compaction and log compaction plans
- :mod:`.rollback` - rollback plan and rollback metadata
- :mod:`.clean` - cleaner plan and clean metadata

Every name is re-exported here: import from ``streamer.table.metadata``.
"""

from streamer.errors import CorruptDataError  # re-exported: importers take it from here
from streamer.table.metadata.archive import (
    ARCHIVED_COMMIT_METADATA_SCHEMA,
    ARCHIVED_REPLACE_COMMIT_METADATA_SCHEMA,
    ARCHIVED_WRITE_STAT_FIELDS,
)
from streamer.table.metadata.avro import AVRO_MAGIC, read_avro, write_avro
from streamer.table.metadata.clean import (
    CLEAN_METADATA_SCHEMA,
    CLEANER_PLAN_SCHEMA,
    CleanerPlan,
    CleanMetadata,
    CleanPartitionMetadata,
)
from streamer.table.metadata.commit import (
    CHECKPOINT_KEY,
    CHECKPOINT_KEY_V2,
    SCHEMA_KEY,
    CommitMetadata,
    WriteStat,
)
from streamer.table.metadata.compaction import (
    COMPACTION_PLAN_SCHEMA,
    CompactionOperation,
    CompactionPlan,
)
from streamer.table.metadata.rollback import (
    ROLLBACK_METADATA_SCHEMA,
    ROLLBACK_PLAN_SCHEMA,
    RollbackMetadata,
    RollbackPartitionMetadata,
    RollbackPlan,
    RollbackRequest,
)

__all__ = [
    "ARCHIVED_COMMIT_METADATA_SCHEMA",
    "ARCHIVED_REPLACE_COMMIT_METADATA_SCHEMA",
    "ARCHIVED_WRITE_STAT_FIELDS",
    "AVRO_MAGIC",
    "CHECKPOINT_KEY",
    "CHECKPOINT_KEY_V2",
    "CLEANER_PLAN_SCHEMA",
    "CLEAN_METADATA_SCHEMA",
    "COMPACTION_PLAN_SCHEMA",
    "ROLLBACK_METADATA_SCHEMA",
    "ROLLBACK_PLAN_SCHEMA",
    "SCHEMA_KEY",
    "CleanMetadata",
    "CleanPartitionMetadata",
    "CleanerPlan",
    "CommitMetadata",
    "CompactionOperation",
    "CompactionPlan",
    "CorruptDataError",
    "RollbackMetadata",
    "RollbackPartitionMetadata",
    "RollbackPlan",
    "RollbackRequest",
    "WriteStat",
    "read_avro",
    "write_avro",
]
