"""Delete blocks as Hudi 0.x's ``DefaultHoodieRecordPayload`` orders them (table version 6).

Hudi 0.15 folds a file slice's log in write order, then merges the result with the base
record, through the payload class a version-6 table declares:

- a data record after a delete wins whatever its ordering value: the payload's
  ``preCombine`` takes "natural order" when the older record is a delete (an empty
  payload);
- between two data records the higher ordering value wins (a tie: the later one);
- a delete with an ordering value is ignored when the log's record before it orders
  higher (``processNextDeletedRecord``'s ``choosePrev``); a delete without one (0) never is;
- the log's record is merged with the base record by ordering value
  (``combineAndGetUpdateValue``), but a log that ends in a delete removes the base record,
  whatever the base record's ordering value.

Hudi 1.x reads the same table by event time throughout - a delete orders like any record,
so a lower-ordered re-insert after it loses, and a delete below the base record's ordering
value is ignored - and so do hudi-rs and, for versions 8 and 9, this project
(:mod:`streamer.table.merge`). Version 6 belongs to Hudi 0.x, so its reads follow 0.15.

The two rules differ only for keys that have a delete followed by a data record in the
log, or a delete ordered below the base record's value; those keys (rare: a delete is
normally the key's last event, and carries the newest ordering value) are folded here one
by one, every other key keeps the vectorised merge.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_KEY, _SEQ, _ROW, _ORD = "__mor_key", "__mor_seq", "__mor_row", "__mor_ord"


def payload_order_winners(merged: pa.Table, deletes: pa.Table) -> tuple[pa.Array, pa.Array] | None:
    """(keys decided here, the row of ``merged`` each kept key keeps) for the keys where
    Hudi 0.x's order differs from the event-time merge; ``None`` when there are none.

    ``merged``: the slice's tagged data rows (base at sequence 0) with their ordering
    value in ``__mor_ord``; ``deletes``: tagged delete rows (``del_ord``, ``del_seq``).
    """
    # only rows of keys some delete names can differ: the join below sees those alone
    named = pc.indices_nonzero(pc.is_in(merged.column(_KEY), value_set=deletes.column(_KEY)))
    cand = _candidates(merged.select([_KEY, _SEQ, _ORD]).take(named), deletes)
    if cand is None:
        return None
    index = pc.indices_nonzero(pc.is_in(merged.column(_KEY), value_set=cand))
    rows = merged.select([_KEY, _SEQ, _ROW, _ORD]).take(index).append_column("__at", index)
    dels = deletes.filter(pc.is_in(deletes.column(_KEY), value_set=cand))
    events: dict[str, list[tuple[int, int, int, Any, int]]] = {}
    for key, seq, row, ordv, at in zip(*(rows.column(c).to_pylist() for c in (_KEY, _SEQ, _ROW, _ORD, "__at")),
                                       strict=True):
        events.setdefault(key, []).append((seq, 1, row, ordv, at))  # data after a delete of its block
    for key, seq, ordv in zip(*(dels.column(c).to_pylist() for c in (_KEY, "del_seq", "del_ord")), strict=True):
        events.setdefault(key, []).append((seq, 0, 0, ordv, -1))
    kept = [(key, at) for key, evs in events.items() if (at := _fold(sorted(evs, key=lambda e: e[:3]))) is not None]
    return cand, pa.array([at for _, at in kept], pa.int64())


def _candidates(merged: pa.Table, deletes: pa.Table) -> pa.Array | None:
    """Keys with a data record written after one of their deletes, or a base record
    ordered above one of their deletes (a superset of where the two rules differ)."""
    firsts = deletes.group_by(_KEY).aggregate([("del_seq", "min"), ("del_ord", "min")])
    joined = merged.join(firsts, _KEY, join_type="inner")
    if not len(joined):
        return None
    after = pc.greater(joined.column(_SEQ), joined.column("del_seq_min"))
    d_ord = joined.column("del_ord_min")
    base_above = pc.and_(pc.equal(joined.column(_SEQ), 0), _greater(joined.column(_ORD), d_ord))
    hit = pc.fill_null(pc.or_(after, base_above), False)
    keys = pc.unique(joined.column(_KEY).filter(hit))
    return keys if len(keys) else None


def _greater(a: pa.ChunkedArray, b: pa.ChunkedArray) -> pa.ChunkedArray:
    try:
        return pc.greater(a, b.cast(a.type) if not b.type.equals(a.type) else b)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.chunked_array([np.zeros(len(a), dtype=bool)])


def _natural(ordv: Any) -> bool:
    return ordv is None or ordv == 0


def _higher(a: Any, b: Any) -> bool:
    """a orders strictly above b (a missing value orders lowest)."""
    if a is None:
        return False
    if b is None:
        return True
    try:
        return bool(a > b)
    except TypeError:
        return False


def _fold(events: list[tuple[int, int, int, Any, int]]) -> int | None:
    """One key's events in write order -> the row kept, or None (deleted)."""
    base: tuple[Any, int] | None = None
    state: tuple[Any, int] | None = None  # the log's record (ordering value, row)
    deleted = False
    for seq, is_data, _, ordv, at in events:
        if is_data and seq == 0:
            base = (ordv, at)
        elif is_data:
            if deleted or state is None or not _higher(state[0], ordv):
                state = (ordv, at)  # natural order after a delete; ties go to the later
            deleted = False
        elif state is not None and not deleted and not _natural(ordv) and _higher(state[0], ordv):
            continue  # choosePrev: the record before the delete orders higher
        else:
            deleted, state = True, None
    if deleted:
        return None
    if state is None:
        return base[1] if base is not None else None
    if base is not None and _higher(base[0], state[0]):
        return base[1]
    return state[1]
