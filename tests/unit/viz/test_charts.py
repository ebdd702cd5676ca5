"""Benchmark tables become PNG charts linked below them in RESULTS.md."""

from __future__ import annotations

from benchmarks.charts import chart_data, chart_section, number, parse_tables

PNG = b"\x89PNG\r\n\x1a\n"

BODY = [
    "Command: `python -m benchmarks.bench_x`",
    "",
    "| sink | batch | wall p50 (s) | records/s | ratio | note |",
    "|---|---:|---:|---:|---:|---|",
    "| ours | 10,000 | 0.19 | 52,487 | 1.00x | fast |",
    "| theirs | 10,000 | 3.16 | 3,281 | 16.85x | slow |",
    "",
    "Reading: ours is faster.",
]


def test_cells_read_as_the_numbers_they_show():
    assert number("52,487") == 52487
    assert number("1.00x") == 1.0
    assert number("5.06 MB (0.00 + 5.06)") == 5.06
    assert number("`**0.71x**`") == 0.71
    assert number("mor-streamer upsert") is None


def test_labels_come_from_leading_text_and_integer_columns():
    (table,) = parse_tables(BODY)
    data = chart_data(table, "Write")
    assert data.labels == ("ours, 10,000", "theirs, 10,000")
    assert [s.name for s in data.series] == ["wall p50 (s)", "records/s", "ratio"]
    assert data.series[1].values == (52487.0, 3281.0)


def test_a_section_gets_one_png_per_table_linked_once(tmp_path):
    charts = tmp_path / "charts"
    once = chart_section("## Write: upsert throughput", BODY, charts)
    png = charts / "write-upsert-throughput.png"
    assert png.read_bytes()[:8] == PNG
    link = "![Write: upsert throughput: chart](charts/write-upsert-throughput.png)"
    assert once.count(link) == 1
    end = parse_tables(BODY)[0].end
    assert once[end - 1].startswith("| theirs") and once[end:end + 2] == ["", link]  # right below the table
    assert chart_section("## Write: upsert throughput", once, charts) == once  # redrawing adds no second link
