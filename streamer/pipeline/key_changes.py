"""The row a primary-key change deleted in an earlier commit, as it stood before.

Debezium sends a primary-key change as a delete of the old key and a create of the new
one, both at the update's log position. The create carries the unchanged TOASTed values
as Debezium's placeholder (:mod:`streamer.pipeline.unavailable`), and its values are the
old key's. When a batch boundary falls between the two (the batch limit, a restart), the
delete is committed first and the old row is gone from the table's snapshot, so the value
has to come from the table as it was before that delete.

The delete is found by its position: a delete record keeps the change's ordering value
(the log position, ``_event_lsn`` or ``_event_seq``), which the create shares. Only the
newest delta commits are searched, the delete blocks their write stats name, because the
create follows its delete in the same topic partition; the old row is then read by time
travel to the write before the deleting commit. A row the cleaner has removed since, or a
delete beyond the searched commits, is not found: the caller reports that create as it
did before (the error table, naming the column and key).
"""

from __future__ import annotations

import logging
import posixpath
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from streamer.errors import MissingFileError, VersionsCleanedError
from streamer.table.log_content import ORDERING_VALUE
from streamer.table.log_format import BlockType, read_log_file
from streamer.table.meta_fields import RECORD_KEY

if TYPE_CHECKING:
    from streamer.read.table import Table
    from streamer.table.instant import Instant

log = logging.getLogger(__name__)

#: The column of :func:`rows_before_deletes`'s answer holding the delete's position.
DELETED_AT = "_deleted_at"
#: How many of the newest completed writes are searched for the deletes.
SEARCHED_COMMITS = 20


def rows_before_deletes(table: Table, positions: pa.Array, columns: list[str], *,
                        searched_commits: int = SEARCHED_COMMITS) -> pa.Table | None:
    """For each ordering value in ``positions`` that a delete of the table's newest
    ``searched_commits`` writes carries: the deleted key's ``columns`` before that delete,
    with the position under :data:`DELETED_AT` (None: none found)."""
    wanted = {v for v in positions.to_pylist() if v is not None}
    writes = table.timeline.completed_writes()
    found: list[pa.Table] = []
    for i in range(len(writes) - 1, max(0, len(writes) - searched_commits) - 1, -1):
        if not wanted:
            break
        deleted = _deletes_of(table, writes[i], wanted)
        if not deleted or i == 0:
            continue
        rows = _rows_as_of(table, writes[i - 1], list(deleted), columns)
        if rows is None or not rows.num_rows:
            continue
        at = pa.array([deleted[k] for k in rows.column(RECORD_KEY).to_pylist()])
        found.append(rows.append_column(DELETED_AT, at))
        wanted.difference_update(at.to_pylist())
    if not found:
        return None
    return pa.concat_tables(found, promote_options="permissive")


def _deletes_of(table: Table, instant: Instant, wanted: set[Any]) -> dict[str, Any]:
    """The keys ``instant`` deleted at one of the ``wanted`` positions, with the position."""
    out: dict[str, Any] = {}
    for stat in table.snapshot.commit_metadata(instant).write_stats():
        if not stat.num_deletes or not stat.path or not stat.is_log:
            continue
        try:
            blocks = read_log_file(table.fs, posixpath.join(table.base_path, stat.path))
        except MissingFileError:
            continue  # cleaned since
        for block in blocks:
            if block.block_type != BlockType.DELETE or block.instant_time != instant.timestamp:
                continue
            deletes = block.deletes()
            for key, at in zip(deletes.column(RECORD_KEY).to_pylist(),
                               deletes.column(ORDERING_VALUE).to_pylist(), strict=True):
                if at in wanted:
                    out.setdefault(key, at)
    return out


def _rows_as_of(table: Table, instant: Instant, keys: list[str], columns: list[str]) -> pa.Table | None:
    known = table.schema()
    present = [c for c in columns if known is None or c in known.names]
    try:
        return table.read(as_of=instant.timestamp, columns=[RECORD_KEY, *present],
                          filter=pc.field(RECORD_KEY).isin(keys))
    except (MissingFileError, VersionsCleanedError) as e:
        # the slices of that time were cleaned, or a clean's retention forbids reading as of
        # then: not found, so the create goes to the error table rather than failing the batch
        # (a pending write at that time fails it: asked again after its rollback, it is found)
        log.info("the rows of %d deleted key(s) as of %s cannot be read: %s", len(keys), instant.timestamp, e)
        return None
