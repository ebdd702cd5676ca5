"""Debezium's unavailable-value placeholder resolved at write time, so no reader sees it.

Postgres does not log a TOASTed value (text over ~2 kB) that an update leaves unchanged,
and Debezium's Postgres connector then sends ``__debezium_unavailable_value`` in its
place. Apache Hudi's answer is a payload (``PostgresDebeziumAvroPayload``) that swaps the
placeholder for the stored value when it merges. That works only in readers that load
that payload class, and it leaves the placeholder in the log blocks for every other
engine, hudi-rs and Trino among them, to show as data. It also merges within a batch
before it looks at the table, so two updates of one key in one batch, the first changing
the text and the second not, end with the table's older text.

Here the placeholder is replaced before the rows are written, in the order of the
changes: from the same key's previous change in the batch when there is one, else from
the table's current row. The table then holds plain rows that every reader reads alike.
A key whose value is in neither place (the pipeline started after the row was written,
without Debezium's snapshot) cannot be completed: its row goes to the error table naming
the column, and the rest of the batch is written.

The stored values are read with a snapshot read of the key column and the affected
columns, filtered to the keys in question.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.pipeline.errors_table import REASON_COL
from streamer.pipeline.key_changes import DELETED_AT
from streamer.pipeline.placeholder import Placeholder

DEFAULT_PLACEHOLDER = Placeholder.of()

#: Given record keys and column names, the table's current values: a table with
#: ``_hoodie_record_key`` and those columns (None: no table yet).
StoredValues = Callable[[pa.Array, list[str]], "pa.Table | None"]
#: Given the positions (ordering values) of key changes whose delete an earlier batch
#: committed, and column names: the old keys' rows as they were before those deletes, with
#: the position in :data:`DELETED_AT` (:func:`streamer.pipeline.key_changes.rows_before_deletes`).
DeletedValues = Callable[[pa.Array, list[str]], "pa.Table | None"]

_KEY = "_hoodie_record_key"


def placeholder_columns(rows: pa.Table, skip: tuple[str, ...] = (),
                        placeholder: Placeholder = DEFAULT_PLACEHOLDER) -> list[str]:
    """The columns of ``rows`` in which the placeholder occurs, in any of its forms
    (:mod:`streamer.pipeline.placeholder`)."""
    return [field.name for field in rows.schema
            if field.name not in skip and placeholder.forms(field.type)
            and placeholder.matches(rows.column(field.name)).any()]


def resolve(rows: pa.Table, keys: pa.Array, ordering: str | None, stored: StoredValues,
            deleted: str | None = None, operation: str | None = None,
            deleted_rows: DeletedValues | None = None,
            placeholder: Placeholder = DEFAULT_PLACEHOLDER) -> pa.Table:
    """``rows`` with every placeholder replaced (module doc); rows that cannot be
    completed get a reason in :data:`REASON_COL` (added if absent) and keep their values.

    ``keys`` are the rows' record keys (as the writer builds them); ``ordering`` the
    column that orders changes of one key (ties: arrival order); ``deleted`` the boolean
    column marking deletes, whose values nobody reads (they need no completing).

    ``operation`` (Debezium's ``op``) pairs a primary-key change: Debezium sends it as a
    delete of the old key and a create of the new one at the same log position, and the
    create's unchanged values are the old key's. A create whose value is not in the batch
    takes it from the old key's earlier changes in the batch, else from the table's row
    of the old key (whose delete the same batch writes). When the delete came in an
    earlier batch the old row is gone from the snapshot: ``deleted_rows`` finds it as it
    was before that delete; a row found nowhere goes to the error table.

    ``placeholder``: the connector's (``unavailable.value.placeholder``), Debezium's
    default unless set.
    """
    columns = placeholder_columns(rows, skip=(REASON_COL,), placeholder=placeholder)
    if not columns:
        return rows
    n = rows.num_rows
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    order, group_start = _log_order(rows, keys, ordering)
    sorted_keys = keys.take(pa.array(order))
    is_delete = np.zeros(n, dtype=bool)
    if deleted is not None and deleted in rows.column_names:
        flags = pc.fill_null(rows.column(deleted).combine_chunks().take(pa.array(order)), False)
        is_delete = flags.to_numpy(zero_copy_only=False)
    resolved: dict[str, pa.Array] = {}
    need_table: dict[str, np.ndarray] = {}
    # A delete ends its key's row: the changes after it (a re-insert, the create of a key
    # change into the key) start a segment of their own, and neither the delete (whose
    # values are the old row's, or null) nor anything before it carries their values.
    # A change with no earlier change of its segment carrying the value follows the
    # segment's first change, which alone is completed from outside the segment.
    segment_start = np.maximum(group_start, np.maximum.accumulate(np.where(is_delete, np.arange(n), -1)) + 1)
    segment_start = np.where(is_delete, np.arange(n), segment_start)  # a delete is in none
    first = np.arange(n) == segment_start
    followers: dict[str, np.ndarray] = {}
    for name in columns:
        values = rows.column(name).combine_chunks().take(pa.array(order))
        is_ph = placeholder.matches(values) & ~is_delete
        # the nearest earlier change of the same segment that carried the value
        previous = np.maximum.accumulate(np.where(~is_ph & ~is_delete, np.arange(n), -1))
        source = np.where(is_ph & (previous >= segment_start), previous, np.where(is_ph, -1, np.arange(n)))
        resolved[name] = values.take(pa.array(np.where(source >= 0, source, np.arange(n))))
        need_table[name] = (source < 0) & first
        followers[name] = (source < 0) & ~first
    lookup_keys = sorted_keys
    chained = {name: np.arange(n) for name in columns}  # the position whose final value a row takes
    if operation is not None and ordering is not None and operation in rows.column_names:
        lookup_keys = _key_changes(rows, order, group_start, segment_start, sorted_keys, ordering, operation,
                                   is_delete, resolved, need_table, followers, chained)
    # the table's row of a key deleted earlier in the batch is the deleted one: a change
    # after the delete that no key change in the batch completes is not completed from it
    own = pc.fill_null(pc.equal(lookup_keys, sorted_keys), True).to_numpy(zero_copy_only=False)
    after_delete = (segment_start > group_start) & own
    held = {name: mask & after_delete for name, mask in need_table.items()}
    missing = _from_table(lookup_keys, resolved, {name: mask & ~after_delete for name, mask in need_table.items()},
                          stored)
    missing = {name: missing.get(name, np.zeros(n, dtype=bool)) | mask for name, mask in held.items()
               if mask.any() or name in missing}
    if missing and deleted_rows is not None and ordering is not None and operation in rows.column_names:
        creates = pc.equal(rows.column(operation).combine_chunks().take(pa.array(order)), "c")
        positions = rows.column(ordering).combine_chunks().take(pa.array(order))
        is_create = pc.fill_null(creates, False).to_numpy(zero_copy_only=False)
        missing = _from_deleted(positions, is_create, resolved, missing, deleted_rows)
        missing = _replayed(sorted_keys, positions, is_create, ordering, resolved, missing, stored)
    missing = _follow_chains(chained, resolved, missing)
    missing = _follow_first(segment_start, followers, resolved, missing)
    return _completed(rows, order, sorted_keys, resolved, missing)


def _completed(rows: pa.Table, order: np.ndarray, sorted_keys: pa.Array, resolved: dict[str, pa.Array],
               missing: dict[str, np.ndarray]) -> pa.Table:
    """``rows`` with the ``resolved`` columns (in log order) put back in arrival order, and a
    reason in :data:`REASON_COL` for each row still ``missing`` a value (its first column)."""
    n = rows.num_rows
    reasons: list[str | None] = (rows.column(REASON_COL).to_pylist() if REASON_COL in rows.column_names
                                 else [None] * n)
    for name, mask in missing.items():
        for pos in np.nonzero(mask)[0]:
            row = int(order[pos])
            if reasons[row] is None:
                reasons[row] = (f"column '{name}' is Debezium's unavailable-value placeholder (an unchanged "
                                f"TOASTed value) and neither the batch nor the table has the value of key "
                                f"{sorted_keys[pos].as_py()!r}")
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.arange(n)
    out = rows
    for name, column in resolved.items():
        out = out.set_column(out.schema.get_field_index(name), name, column.take(pa.array(inverse)))
    reason_array = pa.array(reasons, pa.string())
    if REASON_COL in out.column_names:
        return out.set_column(out.schema.get_field_index(REASON_COL), REASON_COL, reason_array)
    return out.append_column(REASON_COL, reason_array)


def _key_changes(rows: pa.Table, order: np.ndarray, group_start: np.ndarray, segment_start: np.ndarray,
                 sorted_keys: pa.Array, ordering: str, operation: str, is_delete: np.ndarray,
                 resolved: dict[str, pa.Array], need_table: dict[str, np.ndarray], followers: dict[str, np.ndarray],
                 chained: dict[str, np.ndarray]) -> pa.Array:
    """Creates of a key change completed from the old key's last change before its delete
    in the batch when that change has its value (in place); returns the keys to look the
    rest up by: the old key for those creates. The old key's deletes are stepped over: a
    connector's restart sends a delete again (at the same position). A loop over the few
    rows still unresolved, not over the batch.

    A create whose old key's value is not known yet (that key's first change in the batch
    waits for the table, the deleted rows, or is itself the create of a key change) takes
    that change's final value: ``chained`` (in place) names the position, followed by
    :func:`_follow_chains` once the table has been asked. The creates are taken in log
    order, so a chain of key changes within the batch (a to b, then b to c, the value
    unchanged both times) ends at the first change that has the value."""
    columns = list(need_table)
    wanted = np.zeros(len(order), dtype=bool)
    for mask in need_table.values():
        wanted |= mask
    if not wanted.any():
        return sorted_keys
    ops = rows.column(operation).combine_chunks().take(pa.array(order)).to_pylist()
    lsns = rows.column(ordering).combine_chunks().take(pa.array(order)).to_pylist()
    keys = sorted_keys.to_pylist()
    deletes = {lsns[p]: p for p in np.nonzero(is_delete)[0]}  # the old key's delete, by log position
    lookup = list(keys)
    values = {name: resolved[name].to_pylist() for name in columns}
    wanted_pos = np.nonzero(wanted)[0]
    for pos in wanted_pos[np.argsort([lsns[p] for p in wanted_pos], kind="stable")]:
        gone = deletes.get(lsns[pos]) if ops[pos] == "c" else None
        if gone is None or keys[gone] == keys[pos]:
            continue
        head = group_start[gone]  # the old key's first change in the batch
        lookup[pos] = keys[gone]
        before = gone - 1  # the old key's last change before its delete(s), if the batch has one
        while before >= head and is_delete[before]:
            before -= 1
        if before < head:
            continue
        for name in columns:
            mask = need_table[name]
            if not mask[pos]:
                continue
            # a follower has its segment's first change's value
            source = segment_start[before] if followers[name][before] else before
            if not mask[source] and chained[name][source] == source:
                values[name][pos] = values[name][source]
            else:  # the source waits too: take its final value (a chain ends where the value is)
                chained[name][pos] = chained[name][source]
            mask[pos] = False
    for name in columns:
        resolved[name] = pa.array(values[name], resolved[name].type)
    return pa.array(lookup, sorted_keys.type)


def _follow_chains(chained: dict[str, np.ndarray], resolved: dict[str, pa.Array],
                   missing: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Give each create of a key change whose source waited (:func:`_key_changes`) that
    source's final value, in place; a source still missing leaves its creates missing.
    Returns what is missing, those creates included."""
    out = dict(missing)
    for name, source in chained.items():
        moved = source != np.arange(len(source))
        if not moved.any():
            continue
        resolved[name] = resolved[name].take(pa.array(source))
        if name in missing:
            out[name] = missing[name] | (moved & missing[name][source])
    return out


def _follow_first(segment_start: np.ndarray, followers: dict[str, np.ndarray], resolved: dict[str, pa.Array],
                  missing: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Give each follower (a placeholder with no earlier value of its key's segment in the
    batch, see :func:`resolve`) its segment's first change's value, as completed (in
    place): a create of a key change and the updates of the new key after it in one batch
    take the old key's value alike. Returns what is missing, followers included."""
    starts = pa.array(segment_start)
    out = dict(missing)
    for name, follow in followers.items():
        if not follow.any():
            continue
        resolved[name] = pc.if_else(pa.array(follow), resolved[name].take(starts), resolved[name])
        first_missing = missing.get(name)
        if first_missing is not None:
            out[name] = first_missing | (follow & first_missing[segment_start])
    return out


def _log_order(rows: pa.Table, keys: pa.Array, ordering: str | None) -> tuple[np.ndarray, np.ndarray]:
    """The rows in log order per key (key, ordering value, arrival), and for each position
    in that order the position where its key's rows start."""
    n = rows.num_rows
    frame = {"k": keys, "i": pa.array(np.arange(n))}
    sort_keys = [("k", "ascending")]
    if ordering is not None and ordering in rows.column_names:
        frame["o"] = rows.column(ordering)
        sort_keys.append(("o", "ascending"))
    sort_keys.append(("i", "ascending"))
    order = pc.sort_indices(pa.table(frame), sort_keys=sort_keys).to_numpy()
    sorted_keys = keys.take(pa.array(order))
    starts = np.ones(n, dtype=bool)
    if n > 1:
        starts[1:] = pc.not_equal(sorted_keys.slice(1), sorted_keys.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    return order, np.maximum.accumulate(np.where(starts, np.arange(n), 0))


def _from_table(sorted_keys: pa.Array, resolved: dict[str, pa.Array], need_table: dict[str, np.ndarray],
                stored: StoredValues) -> dict[str, np.ndarray]:
    """Fill ``resolved``'s positions in ``need_table`` from the table's stored values (in
    place); the positions the table has no row for, by column."""
    n = len(sorted_keys)
    wanted = np.zeros(n, dtype=bool)
    for mask in need_table.values():
        wanted |= mask
    if not wanted.any():
        return {}
    found = stored(pc.unique(sorted_keys.filter(pa.array(wanted))), list(resolved))
    hits = np.full(n, -1)
    if found is not None and found.num_rows:
        hits = pc.fill_null(pc.index_in(sorted_keys, value_set=found.column(_KEY).combine_chunks()),
                            -1).to_numpy(zero_copy_only=False)
    missing: dict[str, np.ndarray] = {}
    for name, mask in need_table.items():
        if not mask.any():
            continue
        if found is not None and found.num_rows:
            from_table = found.column(name).combine_chunks().take(pa.array(np.where(hits >= 0, hits, 0)))
            resolved[name] = pc.if_else(pa.array(mask & (hits >= 0)), from_table.cast(resolved[name].type),
                                        resolved[name])
        missing[name] = mask & (hits < 0)
    return missing


def _from_deleted(positions: pa.Array, creates: np.ndarray, resolved: dict[str, pa.Array],
                  missing: dict[str, np.ndarray], deleted_rows: DeletedValues) -> dict[str, np.ndarray]:
    """Fill the creates still missing a value from the rows their key change's delete
    removed in an earlier commit, matched by position (in place); what is still missing."""
    wanted = _any_missing(missing, len(positions)) & creates
    if not wanted.any():
        return missing
    found = deleted_rows(pc.unique(positions.filter(pa.array(wanted))), list(missing))
    if found is None or not found.num_rows:
        return missing
    at = found.column(DELETED_AT).combine_chunks().cast(positions.type)
    hits = pc.fill_null(pc.index_in(positions, value_set=at), -1).to_numpy(zero_copy_only=False)
    hits = np.where(wanted, hits, -1)
    return _fill(found, pa.array(np.where(hits >= 0, hits, 0)), hits >= 0, resolved, missing)


def _replayed(sorted_keys: pa.Array, positions: pa.Array, creates: np.ndarray, ordering: str,
              resolved: dict[str, pa.Array], missing: dict[str, np.ndarray],
              stored: StoredValues) -> dict[str, np.ndarray]:
    """Creates still missing a value whose new key the table already holds at the same or a
    later position: a change sent again (a connector's restart resends from its last flushed
    offset, which can be older than the commits searched for the delete). The stored row is
    that change or a newer one, so its value is the one to keep; the create does not win
    the merge over it anyway. Fills in place; returns what is still missing."""
    wanted = _any_missing(missing, len(positions)) & creates
    if not wanted.any():
        return missing
    found = stored(pc.unique(sorted_keys.filter(pa.array(wanted))), [*missing, ordering])
    if found is None or not found.num_rows or ordering not in found.column_names:
        return missing
    hits = pc.fill_null(pc.index_in(sorted_keys, value_set=found.column(_KEY).combine_chunks()),
                        -1).to_numpy(zero_copy_only=False)
    take = pa.array(np.where(hits >= 0, hits, 0))
    at = found.column(ordering).combine_chunks().take(take).cast(positions.type)
    newer = wanted & (hits >= 0) & pc.fill_null(pc.greater_equal(at, positions), False).to_numpy(zero_copy_only=False)
    return _fill(found, take, newer, resolved, missing)


def _any_missing(missing: dict[str, np.ndarray], n: int) -> np.ndarray:
    """The positions missing a value in any column."""
    out = np.zeros(n, dtype=bool)
    for mask in missing.values():
        out |= mask
    return out


def _fill(found: pa.Table, take: pa.Array, usable: np.ndarray, resolved: dict[str, pa.Array],
          missing: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Fill the ``missing`` positions that are ``usable`` from ``found`` (its row ``take[i]``
    for position ``i``), in place; what is still missing."""
    still: dict[str, np.ndarray] = {}
    for name, mask in missing.items():
        fill = mask & usable if name in found.column_names else np.zeros_like(mask)
        if fill.any():
            values = found.column(name).combine_chunks().take(take).cast(resolved[name].type)
            resolved[name] = pc.if_else(pa.array(fill), values, resolved[name])
        if (mask & ~fill).any():
            still[name] = mask & ~fill
    return still
