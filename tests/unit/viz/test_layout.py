"""The layout picture: every group when few, the busiest (pending first) when many."""

from __future__ import annotations

from streamer.viz.layout import MAX_ROWS, FileBox, GroupRow, TableLayout, draw_layout, drawn_groups


def _group(i: int, logs: int, pending: tuple[str, ...] = ()) -> GroupRow:
    files = (FileBox(f"b{i}", "base", 1000), *(FileBox(f"l{i}.{j}", "log", 10) for j in range(logs)))
    return GroupRow(f"p{i % 3}", f"fg{i:05d}", files, pending)


def test_many_groups_draw_the_busiest_in_partition_order(tmp_path):
    groups = [_group(i, logs=i % 4) for i in range(MAX_ROWS * 2)]
    groups[0] = _group(0, logs=0, pending=("compaction 1",))  # quiet but planned: shown
    layout = TableLayout("t", tuple(sorted(groups, key=lambda g: (g.partition, g.file_id))), ("compaction 1",))
    shown = drawn_groups(layout)
    assert len(shown) == MAX_ROWS
    assert any(g.pending for g in shown)
    assert min(g.log_files for g in shown if not g.pending) >= 2
    assert list(shown) == sorted(shown, key=lambda g: (g.partition, g.file_id))
    assert draw_layout(layout, tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_few_groups_are_all_drawn():
    layout = TableLayout("t", (_group(1, 2), _group(2, 0)), ())
    assert drawn_groups(layout) == layout.groups
    assert layout.log_files == 2 and layout.partitions == 2
