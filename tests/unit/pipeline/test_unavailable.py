"""Debezium's unchanged-TOAST placeholder completed at write time (streamer/pipeline/unavailable.py)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streamer.pipeline.errors_table import REASON_COL
from streamer.pipeline.placeholder import PLACEHOLDER, Placeholder
from streamer.pipeline.unavailable import placeholder_columns, resolve

PH = PLACEHOLDER


def stored_from(table: dict[str, str]):
    calls = []

    def stored(keys: pa.Array, columns: list[str]) -> pa.Table | None:
        calls.append((sorted(keys.to_pylist()), columns))
        wanted = [k for k in keys.to_pylist() if k in table]
        return pa.table({"_hoodie_record_key": wanted, "note": [table[k] for k in wanted]})

    return stored, calls


def rows(*changes: tuple[str, int, str | None, bool]) -> pa.Table:
    keys, lsn, note, deleted = zip(*changes, strict=True)
    return pa.table({"id": list(keys), "_event_lsn": list(lsn), "note": list(note), "_hoodie_is_deleted": list(deleted)})


def test_a_placeholder_takes_the_previous_change_of_its_key_in_log_order_else_the_table():
    batch = rows(
        ("a", 20, PH, False),         # arrives first but follows lsn 10: takes "a full"
        ("a", 10, "a full", False),
        ("b", 5, PH, False),          # nothing earlier in the batch: the table's value
        ("c", 7, None, False),        # a real null stays null
        ("a", 30, "a new", False),
        ("a", 40, PH, False),         # after the change at 30: "a new"
    )
    stored, calls = stored_from({"b": "b stored"})
    out = resolve(batch, batch.column("id"), "_event_lsn", stored, deleted="_hoodie_is_deleted")
    assert out.column("note").to_pylist() == ["a full", "a full", "b stored", None, "a new", "a new"]
    assert out.column(REASON_COL).null_count == out.num_rows
    assert calls == [(["b"], ["note"])]  # only the keys the batch could not complete


def test_a_value_nowhere_to_be_found_flags_its_row_by_column_and_key():
    batch = rows(("x", 1, PH, False), ("y", 2, "fine", False))
    stored, _ = stored_from({})
    out = resolve(batch, batch.column("id"), "_event_lsn", stored)
    reasons = out.column(REASON_COL).to_pylist()
    assert reasons[1] is None
    assert "column 'note'" in reasons[0] and "'x'" in reasons[0]


def test_deletes_need_no_completing_and_a_batch_without_placeholders_is_untouched():
    batch = rows(("d", 3, PH, True))
    stored, calls = stored_from({})
    out = resolve(batch, batch.column("id"), "_event_lsn", stored, deleted="_hoodie_is_deleted")
    assert out.column(REASON_COL).to_pylist() == [None] and not calls
    plain = rows(("a", 1, "x", False))
    assert resolve(plain, plain.column("id"), "_event_lsn", stored) is plain


def test_binary_columns_are_searched_too():
    t = pa.table({"id": ["a"], "blob": pa.array([PH.encode()], pa.binary()), "n": [1]})
    assert placeholder_columns(t) == ["blob"]
    assert placeholder_columns(t.drop_columns(["blob"])) == []


def resolve_changes(changes, stored, deleted_rows=None) -> pa.Table:
    """``changes`` as (key, lsn, note, is a delete, op) in arrival order, resolved as the
    pipeline resolves a Debezium batch."""
    ks, lsn, note, deleted, ops = zip(*changes, strict=True)
    batch = pa.table({"id": list(ks), "_event_lsn": list(lsn), "note": list(note),
                      "_hoodie_is_deleted": list(deleted), "_change_operation_type": list(ops)})
    return resolve(batch, batch.column("id"), "_event_lsn", stored, deleted="_hoodie_is_deleted",
                   operation="_change_operation_type", deleted_rows=deleted_rows)


def change(key, lsn, note, op):
    return (key, lsn, note, op == "d", op)


def by_key(out: pa.Table, column: str) -> dict:
    return dict(zip(out.column("id").to_pylist(), out.column(column).to_pylist(), strict=True))


def test_a_key_change_takes_the_old_keys_values():
    """Debezium sends a primary-key change as a delete of the old key and a create of the
    new one at the same log position; the create's unchanged text is the old key's."""
    stored, calls = stored_from({"c": "c stored"})
    out = resolve_changes([
        change("a", 10, "a text", "u"),
        change("a", 20, None, "d"), change("b", 20, PH, "c"),      # a -> b, in the batch's a
        change("c", 30, None, "d"), change("d", 30, PH, "c"),      # c -> d, in the table's c
        change("e", 40, None, "d"), change("f", 40, PH, "c"),      # e -> f, e gone already
    ], stored)
    notes, reasons = by_key(out, "note"), by_key(out, REASON_COL)
    assert (notes["b"], notes["d"]) == ("a text", "c stored")
    assert reasons["b"] is None and reasons["d"] is None
    assert "'f'" in reasons["f"]  # the old row was deleted by an earlier batch, and no deleted_rows
    assert calls == [(["c", "e"], ["note"])]


def deleted_e(positions: pa.Array, columns: list[str]) -> pa.Table | None:
    """e's row as it was before its delete at 40, committed by an earlier batch."""
    from streamer.pipeline.key_changes import DELETED_AT

    return pa.table({"_hoodie_record_key": ["e"], "note": ["e text"], DELETED_AT: [40]})


def test_a_key_change_whose_delete_an_earlier_batch_committed_takes_the_deleted_row():
    """The batch boundary fell between the delete of the old key and the create of the new
    one: the create's unchanged value is the old row's as it was before that delete, found by
    the shared log position (``deleted_rows``, streamer/pipeline/key_changes.py). Only a
    create is completed that way, and one found nowhere still goes to the error table."""
    asked = []

    def deleted_rows(positions: pa.Array, columns: list[str]) -> pa.Table | None:
        asked.append((sorted(positions.to_pylist()), columns))
        return deleted_e(positions, columns)

    stored, _ = stored_from({})
    out = resolve_changes([change("f", 40, PH, "c"), change("g", 50, PH, "c"), change("u", 40, PH, "u")],
                          stored, deleted_rows)
    notes, reasons = by_key(out, "note"), by_key(out, REASON_COL)
    assert notes["f"] == "e text" and reasons["f"] is None
    assert "'g'" in reasons["g"]  # no delete at 50
    assert "'u'" in reasons["u"]  # an update, not a create: its key is its own
    assert asked == [([40, 50], ["note"])]


def test_the_changes_after_a_completed_first_change_of_a_key_follow_it():
    """A key's later changes in the batch that carry the placeholder take its first
    change's value however that was completed: the new key's updates after a key change
    take the old key's text (from the batch, the table, or the deleted row), and an update
    after an update from the table takes the table's value; one found nowhere fails all."""
    stored, calls = stored_from({"k": "k stored"})
    out = resolve_changes([
        change("a", 10, "a text", "u"), change("a", 20, None, "d"), change("b", 20, PH, "c"),
        change("b", 25, PH, "u"),                                   # a -> b in the batch, then b updated
        change("f", 40, PH, "c"), change("f", 45, PH, "u"),         # e -> f, e's delete committed before
        change("k", 50, PH, "u"), change("k", 55, PH, "u"),         # k's text in the table
        change("z", 60, PH, "u"), change("z", 65, PH, "u"),         # z's text nowhere
    ], stored, deleted_e)
    got = list(zip(out.column("id").to_pylist(), out.column("_event_lsn").to_pylist(),
                   out.column("note").to_pylist(), [r is not None for r in out.column(REASON_COL).to_pylist()],
                   strict=True))
    assert got == [("a", 10, "a text", False), ("a", 20, None, False), ("b", 20, "a text", False),
                   ("b", 25, "a text", False), ("f", 40, "e text", False), ("f", 45, "e text", False),
                   ("k", 50, "k stored", False), ("k", 55, "k stored", False),
                   ("z", 60, PH, True), ("z", 65, PH, True)]
    assert calls == [(["f", "k", "z"], ["note"])]  # the first change of each key alone is looked up


def test_a_key_change_sent_twice_in_one_batch_takes_the_old_keys_last_value():
    """After a Kafka Connect restart Debezium sends some changes again: the delete of the old
    key and the create of the new one twice, at the same position. The create still takes
    the old key's last value in the batch (stepping over its deletes), and the repeated
    create and the new key's later update follow it. A first change of the old key that
    itself waits for the table is not copied from: the old key is looked up instead."""
    stored, _ = stored_from({"c": "c stored"})
    out = resolve_changes([
        change("a", 1, "a text", "r"), change("a", 5, PH, "u"), change("a", 10, None, "d"),
        change("b", 10, PH, "c"), change("a", 10, None, "d"), change("b", 10, PH, "c"), change("b", 12, PH, "u"),
        change("c", 20, PH, "u"), change("c", 30, None, "d"), change("e", 30, PH, "c"),  # c's text in the table
    ], stored)
    got = [(k, n) for k, n, d in zip(out.column("id").to_pylist(), out.column("note").to_pylist(),
                                     out.column("_hoodie_is_deleted").to_pylist(), strict=True) if not d]
    assert got == [("a", "a text"), ("a", "a text"), ("b", "a text"), ("b", "a text"), ("b", "a text"),
                   ("c", "c stored"), ("e", "c stored")]
    assert out.column(REASON_COL).null_count == out.num_rows


def test_a_key_change_into_a_key_deleted_earlier_in_the_batch_takes_the_old_keys_value():
    """A delete ends its key's row: a later create of that key in the batch (a key change
    into it) takes nothing from the delete or from before it. Such a create used to copy
    the delete's values - null, or the deleted row's own text with REPLICA IDENTITY FULL -
    with no error. Now it takes the old key's value, from the table, from the batch (a
    round trip a to x to a), and one no key change completes is never filled from the
    table's row of its own, deleted key."""
    stored, _ = stored_from({"a": "a old text", "b": "b text", "k": "k deleted text"})
    out = resolve_changes([
        change("a", 10, None, "d"), change("b", 20, None, "d"), change("a", 20, PH, "c"),   # DELETE a; b -> a
        change("m", 5, "m text", "c"), change("m", 30, "m text", "d"), change("x", 30, PH, "c"),
        change("x", 40, None, "d"), change("m", 40, PH, "c"), change("m", 45, PH, "u"),     # m -> x -> m
        change("k", 50, "k deleted text", "d"), change("k", 60, PH, "c"),                   # no delete at 60
    ], stored)
    got = {(k, lsn): (n, r is not None) for k, lsn, n, r, d in zip(
        out.column("id").to_pylist(), out.column("_event_lsn").to_pylist(), out.column("note").to_pylist(),
        out.column(REASON_COL).to_pylist(), out.column("_hoodie_is_deleted").to_pylist(), strict=True) if not d}
    assert got == {("a", 20): ("b text", False), ("m", 5): ("m text", False), ("x", 30): ("m text", False),
                   ("m", 40): ("m text", False), ("m", 45): ("m text", False), ("k", 60): (PH, True)}


def test_a_chain_of_key_changes_in_one_batch_passes_the_unchanged_value_along():
    """A row's key changed twice in one batch (a to b, then b to c), its text unchanged both
    times: the second create takes what the first was completed with, from the batch or
    from the table, however long the chain and whatever the keys' order (z to y to x)."""
    stored, _ = stored_from({"m": "m stored", "z": "z stored"})
    out = resolve_changes([
        change("a", 10, "a text", "u"), change("a", 20, None, "d"), change("b", 20, PH, "c"),
        change("b", 25, PH, "u"), change("b", 30, None, "d"), change("c", 30, PH, "c"),      # from the batch
        change("m", 40, None, "d"), change("n", 40, PH, "c"), change("n", 50, None, "d"),
        change("o", 50, PH, "c"), change("o", 60, None, "d"), change("p", 60, PH, "c"),      # from the table
        change("z", 70, None, "d"), change("y", 70, PH, "c"), change("y", 80, None, "d"),
        change("x", 80, PH, "c"), change("x", 85, PH, "u"),                                   # keys descending
    ], stored)
    got = {(k, lsn): n for k, lsn, n, d in zip(out.column("id").to_pylist(), out.column("_event_lsn").to_pylist(),
                                               out.column("note").to_pylist(),
                                               out.column("_hoodie_is_deleted").to_pylist(), strict=True) if not d}
    assert got == {("a", 10): "a text", ("b", 20): "a text", ("b", 25): "a text", ("c", 30): "a text",
                   ("n", 40): "m stored", ("o", 50): "m stored", ("p", 60): "m stored",
                   ("y", 70): "z stored", ("x", 80): "z stored", ("x", 85): "z stored"}
    assert out.column(REASON_COL).null_count == out.num_rows


def test_a_chain_whose_first_delete_an_earlier_batch_committed_ends_at_the_deleted_row():
    """e to f with the batch boundary between e's delete and f's create, then f to g in this
    batch: g's text is e's as it was before its committed delete, as f's is; a chain whose
    start is found nowhere leaves every create of it in the error table."""
    stored, _ = stored_from({})
    out = resolve_changes([
        change("f", 40, PH, "c"), change("f", 50, None, "d"), change("g", 50, PH, "c"),
        change("s", 60, PH, "c"), change("s", 70, None, "d"), change("t", 70, PH, "c"),  # no delete at 60
    ], stored, deleted_e)
    creates = out.filter(pc.equal(out.column("_change_operation_type"), "c"))
    notes, reasons = by_key(creates, "note"), by_key(creates, REASON_COL)
    assert (notes["f"], notes["g"]) == ("e text", "e text")
    assert reasons["f"] is None and reasons["g"] is None
    assert "'s'" in reasons["s"] and "'t'" in reasons["t"] and notes["t"] == PH


def test_a_create_sent_again_after_its_delete_left_the_searched_commits_keeps_the_stored_value():
    """A connector's restart can resend a key change long after it was applied, its delete
    beyond the commits searched: the new key's stored row, at the same or a later position,
    is that change or a newer one, and gives the value. An older stored row does not."""
    stored_rows = {"n": ("n stored", 40), "o": ("o stored", 10)}

    def stored(keys: pa.Array, columns: list[str]) -> pa.Table | None:
        wanted = [k for k in keys.to_pylist() if k in stored_rows]
        table = pa.table({"_hoodie_record_key": wanted, "note": [stored_rows[k][0] for k in wanted],
                          "_event_lsn": [stored_rows[k][1] for k in wanted]})
        return table.select(["_hoodie_record_key", *columns])

    out = resolve_changes([change("m", 40, None, "d"), change("n", 40, PH, "c"),
                           change("p", 30, None, "d"), change("o", 30, PH, "c")], stored, lambda p, c: None)
    notes, reasons = by_key(out, "note"), by_key(out, REASON_COL)
    assert notes["n"] == "n stored" and reasons["n"] is None
    assert "'o'" in reasons["o"]  # stored at 10, before this create at 30: not its value


def test_a_connectors_own_placeholder_is_recognised_and_the_default_then_is_data():
    """``unavailable.value.placeholder`` set on the connector (text, or ``hex:`` bytes): its
    value is completed; Debezium's default is then an ordinary value, left alone."""
    custom = Placeholder.of("~toast~")
    hexed = Placeholder.of("hex:7e74")
    assert (hexed.text, hexed.data) == ("~t", b"~t")
    stored, _ = stored_from({"a": "a stored"})
    batch = pa.table({"id": ["a", "b"], "_event_lsn": [1, 2], "note": ["~toast~", PH],
                      "_hoodie_is_deleted": [False, False]})
    assert placeholder_columns(batch, placeholder=custom) == ["note"]
    out = resolve(batch, batch.column("id"), "_event_lsn", stored, deleted="_hoodie_is_deleted", placeholder=custom)
    assert out.column("note").to_pylist() == ["a stored", PH]
    assert out.column(REASON_COL).null_count == 2
    blobs = pa.table({"id": ["a"], "blob": pa.array([b"~t"], pa.binary())})
    assert placeholder_columns(blobs, placeholder=hexed) == ["blob"]
    for bad in ("", "hex:"):
        with pytest.raises(ValueError, match="empty"):
            Placeholder.of(bad)
