"""Hudi's metadata table (``.hoodie/metadata``): what a writer that does not maintain it owes.

Apache Hudi keeps, optionally, a second MOR table under ``.hoodie/metadata`` that lists
the data table's files (and indexes). Readers that use it (Hudi 1.x reads it by default)
trust its listing, so a commit it does not record is invisible to them, and a file a
service removed is still listed. This project does not maintain the metadata table, so
it does what Hudi's own writer does when ``hoodie.metadata.enable=false``
(``HoodieTable.maybeDeleteMetadataTable`` -> ``HoodieTableMetadataUtil.deleteMetadataTable``):
before committing, if ``hoodie.table.metadata.partitions`` names any partition, set it and
``hoodie.table.metadata.partitions.inflight`` to empty (readers then list files) and
delete ``.hoodie/metadata``. A later Hudi writer with the metadata table enabled
rebuilds it from a listing. Crash-safe in that order: properties first.

Call with the table's writer lock held.
"""

from __future__ import annotations

import logging
import posixpath

from streamer.fs import FileSystem
from streamer.table.properties import (
    METAFOLDER,
    TableProperties,
    load_properties,
    write_properties,
)
from streamer.table.table_keys import METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT

log = logging.getLogger(__name__)

METADATA_TABLE_FOLDER = "metadata"


def has_metadata_table(props: TableProperties) -> bool:
    """True when Hudi readers would trust a metadata table's file listing."""
    return bool((props.raw.get(METADATA_PARTITIONS) or "").strip())


def drop_metadata_table(fs: FileSystem, base_path: str, props: TableProperties | None = None) -> bool:
    """Disable and delete the metadata table if the table has one; True if it did.

    ``props``: the properties the caller already read under the lock (saves a read).
    """
    props = props if props is not None else load_properties(fs, base_path)
    if not has_metadata_table(props):
        return False
    write_properties(fs, base_path, props.with_updates({METADATA_PARTITIONS: "",
                                                        METADATA_PARTITIONS_INFLIGHT: ""}))
    fs.delete_dir(posixpath.join(base_path, METAFOLDER, METADATA_TABLE_FOLDER))
    log.warning(
        "%s: deleted Hudi's metadata table (partitions %s): this writer does not maintain it; "
        "Hudi readers list files instead, and a Hudi writer with the metadata table enabled "
        "rebuilds it", base_path, props.raw.get(METADATA_PARTITIONS),
    )
    return True
