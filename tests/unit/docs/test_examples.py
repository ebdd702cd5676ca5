"""The README's and the files tutorial's examples run as written, and show what they say.

Each marked block runs in order in one fresh folder (``tests/support/doc_examples.py``:
``streamer`` commands through the entry point in this process, other shell lines with
bash). The README's run is the suite's one local run of ``streamer demo`` (a session
fixture, ``conftest.py``); the demo tests below check that run. Every command is checked
for what it shows, against an independent reading of the table after it (hudi-rs), not
only for its exit code.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.support.doc_examples import Ran, examples, run_examples, streamer_args

REPO = Path(__file__).resolve().parents[3]
#: The demo pipeline's batch size (configs/demo.yaml) and the demo's default batch count.
BATCH, DEMO_BATCHES = 5000, 7


def test_the_documents_mark_their_examples():
    readme = examples(REPO / "README.md")
    assert [e.lang for e in readme] == ["sh", "python"]
    assert ".venv/bin/streamer demo" in readme[0].body and "lake/demo" in readme[0].body
    tutorial = examples(REPO / "docs" / "tutorial-files.md")
    assert [e.file for e in tutorial if e.file] == ["files.yaml"]
    assert len(tutorial) >= 8


def test_streamer_lines_are_told_from_shell_lines():
    assert streamer_args(".venv/bin/streamer show lake/demo --layout d.png   # a picture") == [
        "show", "lake/demo", "--layout", "d.png"]
    assert streamer_args("streamer run files.yaml --pipeline trips") == ["run", "files.yaml", "--pipeline", "trips"]
    for shell in ("streamer read t | head", "mkdir -p x", "streamer read $T", "echo streamer"):
        assert streamer_args(shell) is None, shell


def test_the_demo_refuses_object_storage_before_starting_spark(capsys):
    from streamer.cli import main

    assert main(["demo", "--lake", "s3://lake-bucket/x"]) == 2
    assert "the demo writes a local folder" in capsys.readouterr().err


# -- the README, run once ------------------------------------------------------------------
def _cmd(ran: list[Ran], *argv: str) -> Ran:
    hits = [r for r in ran if r.argv is not None and r.argv[:len(argv)] == list(argv)]
    assert hits, f"no README command starts with streamer {' '.join(argv)}: {[r.text for r in ran]}"
    return hits[0]


def _before(ran: list[Ran], r: Ran) -> dict:
    return ran[ran.index(r) - 1].state


def _jsonl(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _same_row(shown: dict, truth: dict) -> bool:
    return all(str(truth[k]) == str(v) for k, v in shown.items() if k in truth)


@pytest.mark.integration
@pytest.mark.slow
def test_readme_runs_every_command(readme_run):
    cwd, ran = readme_run
    commands = [r.argv[0] for r in ran if r.argv]
    assert commands == ["demo", "validate", "run", "show", "show", "read", "read", "timeline",
                        "log-compact", "compact", "check", "repair", "handover"]
    assert [r.text for r in ran if r.argv is None][-1].startswith("import pyarrow")  # the Python block ran


@pytest.mark.integration
@pytest.mark.slow
def test_demo_ingests_and_shows_the_timeline_and_snapshot(readme_run):
    _, ran = readme_run
    demo = _cmd(ran, "demo")
    out, state = demo.out, demo.state
    # the batches: the first all inserts, each one deltacommit
    assert f"batch 0: in {BATCH} -> written {BATCH}" in out
    for b in range(DEMO_BATCHES):
        assert f"batch {b}: in {BATCH}" in out, out
    assert f"batch {DEMO_BATCHES}:" not in out
    # the timeline section lists every instant of the table, with its action
    assert "2. The table's timeline" in out
    timeline_part = out.split("2. The table's timeline", 1)[1].split("3. What a snapshot", 1)[0]
    for ts, action in state["completed"]:
        assert any(ts in line and action in line for line in timeline_part.splitlines()), (ts, action)
    actions = {a for _, a in state["completed"]}
    assert "deltacommit" in actions and "commit" in actions, actions  # the inline compaction ran
    # the snapshot: the count and the sample are what hudi-rs reads from the table
    rows = state["rows"]
    assert "3. What a snapshot query returns now" in out
    assert f"records (snapshot): {len(rows)}" in out
    assert BATCH < len(rows) < DEMO_BATCHES * BATCH  # updates and deletes of known keys
    for uuid in sorted(rows)[:5]:
        r = rows[uuid]
        assert f"uuid={uuid}, city={r['city']}, ts={r['ts']}, fare_amount={r['fare_amount']}" in out, uuid


@pytest.mark.integration
@pytest.mark.slow
def test_readme_commands_show_the_demo_table(readme_run):
    cwd, ran = readme_run

    validate = _cmd(ran, "validate")
    assert validate.out.startswith("ok  ") and "demo_trips" in validate.out

    run = _cmd(ran, "run")  # one batch from the stored position: batch 7, one more deltacommit
    assert f"batch {DEMO_BATCHES}: in {BATCH}" in run.out + run.err
    new = [c for c in run.state["completed"] if c not in _before(ran, run)["completed"]]
    assert [a for _, a in new][:1] == ["deltacommit"], new
    assert run.state["rows"] != _before(ran, run)["rows"]

    show = _cmd(ran, "show", "lake/demo")
    assert f"records (snapshot): {len(show.state['rows'])}" in show.out
    layout = _cmd(ran, "show", "lake/demo", "--layout")
    assert (cwd / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert layout.state["rows"] == show.state["rows"]

    read = _cmd(ran, "read", "lake/demo", "--limit")
    shown = _jsonl(read.out)
    assert len(shown) == 3
    truth = read.state["rows"]
    for row in shown:  # each row is the table's row for its key, as hudi-rs reads it
        assert row["uuid"] in truth and _same_row(row, truth[row["uuid"]]), row

    incr = _cmd(ran, "read", "lake/demo", "--query", "incremental")
    shown = _jsonl(incr.out)
    assert len(shown) == 3
    for row in shown:
        assert row["uuid"] in incr.state["rows"]
        assert row.get("_hoodie_commit_time", "99") > "20240101000000000"

    timeline = _cmd(ran, "timeline")  # pending and completed instants, services included
    for ts, action, _state in timeline.state["instants"]:
        assert any(ts in line and action in line for line in timeline.out.splitlines()), (ts, action)

    log_compact = _cmd(ran, "log-compact")
    assert log_compact.out.startswith("log compaction"), log_compact.out

    compact = _cmd(ran, "compact")  # --force: a compaction is scheduled and completes as a commit
    scheduled = [line for line in compact.out.splitlines() if line.startswith("compaction: scheduled ")]
    assert scheduled, compact.out
    instant = scheduled[0].split()[2]
    assert (instant, "commit") in compact.state["completed"]
    assert f"compaction {instant}: " in compact.out

    # the services changed the layout, never the rows
    assert compact.state["rows"] == log_compact.state["rows"] == timeline.state["rows"]

    check = _cmd(ran, "check")
    assert "intact (" in check.out and "damaged" not in check.out
    repair = _cmd(ran, "repair")
    assert "lake/demo: nothing to repair" in repair.out
    handover = _cmd(ran, "handover")
    assert handover.out.strip() and all(line.startswith("lake/demo: ") for line in handover.out.splitlines())
    assert handover.state["rows"] == compact.state["rows"]


@pytest.mark.integration
@pytest.mark.slow
def test_readme_python_example_shows_the_rows_it_wrote(readme_run):
    cwd, ran = readme_run
    py = [r for r in ran if r.argv is None][-1]
    first = py.out.splitlines()[0]
    rows = sorted(ast.literal_eval(first), key=lambda r: r["id"])
    assert rows == [{"id": 1, "fare": 9.5}, {"id": 2, "fare": 12.0}]
    spark_show = py.out.split("\n", 1)[1]  # the PySpark data source's show(): the same two rows
    assert "9.5" in spark_show and "12.0" in spark_show and "nyc" in spark_show and "sf" in spark_show
    assert (cwd / "lake" / "t" / ".hoodie" / "hoodie.properties").is_file()


# -- the files tutorial --------------------------------------------------------------------
def _tutorial_state(_: Ran) -> dict:
    from streamer.read import Table

    out = {}
    for name in ("trips", "fares"):
        p = Path("lake") / name
        if (p / ".hoodie" / "hoodie.properties").is_file():
            t = Table.open(str(p))
            out[name] = {"completed": [(i.timestamp, i.action) for i in t.timeline.completed()],
                         "rows": t.read().num_rows}
    return out


@pytest.mark.integration
@pytest.mark.slow
def test_files_tutorial_runs(spark, tmp_path):
    import hudi

    ran = run_examples(REPO / "docs" / "tutorial-files.md", tmp_path, observe=_tutorial_state)
    for table in ("trips", "fares", "_errors/trips"):
        assert (tmp_path / "lake" / table / ".hoodie" / "hoodie.properties").is_file()
    assert (tmp_path / "trips.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert _cmd(ran, "validate").out.startswith("ok  ")
    first_run = _cmd(ran, "run", "files.yaml")
    assert first_run.state["trips"]["rows"] == 3 and first_run.state["fares"]["rows"] == 2
    second = _cmd(ran, "run", "files.yaml", "--pipeline")
    assert second.state["trips"]["rows"] == 4  # t2 updated, t4 new, the bad line to the error table
    errors = _jsonl(_cmd(ran, "read", "lake/_errors/trips").out)
    assert len(errors) == 1 and "not json at all" in json.dumps(errors[0])
    shown = {r["trip_id"]: r for r in _jsonl(_cmd(ran, "read", "lake/trips").out)}
    assert set(shown) == {"t1", "t2", "t3", "t4"} and shown["t2"]["fare"] == 9.75
    assert shown["t2"]["rider_tier"] == "gold"
    # hudi-rs, an independent reader, reads the same rows
    batches = hudi.HudiTableBuilder.from_base_uri(str(tmp_path / "lake" / "trips")).build().read()
    theirs = {r["trip_id"]: r for b in batches for r in b.to_pylist()}
    assert {k: (r["fare"], r["rider_tier"]) for k, r in theirs.items()} == {
        k: (r["fare"], r["rider_tier"]) for k, r in shown.items()}
    timelines = [r for r in ran if r.argv and r.argv[0] == "timeline"]
    assert timelines[0].out.count("deltacommit") >= 2
    compact = _cmd(ran, "compact")
    assert (compact.out.split()[2], "commit") in compact.state["trips"]["completed"]
    assert "commit" in timelines[-1].out
    for check in [r for r in ran if r.argv and r.argv[0] == "check"]:
        assert "intact (" in check.out
