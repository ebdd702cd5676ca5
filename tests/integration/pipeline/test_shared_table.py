"""Two pipelines, one table: each resumes from its own position (issue 12, case 1).

Before positions were kept per pipeline, the stored checkpoint was the table's newest,
whichever pipeline wrote it: pipeline B resumed from A's file watermark and skipped its
own older files for good (50 rows of 100, exit 0, "no new data").
"""

from __future__ import annotations

import json
import os
import time

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.checkpoint import checkpoint_history
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table

pytestmark = pytest.mark.integration

YAML = """
pipelines:
  - name: from_a
    source: {{type: files, path: "{a}", format: json}}
    target: {{path: "{t}", record_key: [id], partition_by: [city], ordering_field: ts}}
    trigger: {{mode: once}}
    engine: local
  - name: from_b
    source: {{type: files, path: "{b}", format: json}}
    target: {{path: "{t}", record_key: [id], partition_by: [city], ordering_field: ts}}
    trigger: {{mode: once}}
    engine: local
"""


def _drop(folder, name: str, ids: range, mtime: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps({"id": f"k{i}", "city": ["sf", "la"][i % 2], "ts": i}) + "\n"
                            for i in ids))
    os.utime(path, (mtime, mtime))


def test_two_pipelines_on_one_table_each_resume_from_their_own_position(tmp_path, spark):
    a, b, table = tmp_path / "a", tmp_path / "b", str(tmp_path / "t")
    now = time.time()
    _drop(b, "b1.json", range(50, 100), now - 60)  # b's file is OLDER than a's
    _drop(a, "a1.json", range(0, 50), now - 30)
    configs, problems = parse_pipelines(YAML.format(a=a, b=b, t=table))
    assert not problems
    run_a, run_b = (PipelineRunner(c, spark=spark) for c in configs)
    assert run_a.run_once().written == 50
    assert run_b.run_once().written == 50, "pipeline b resumed from a's position and skipped its file"
    assert Table.open(table).read().num_rows == 100
    # each goes on from its own position: new files of one are not the other's
    _drop(b, "b2.json", range(100, 120), now)
    assert PipelineRunner(configs[0], spark=spark).run_once().skipped
    assert PipelineRunner(configs[1], spark=spark).run_once().written == 20
    assert Table.open(table).read().num_rows == 120
    # the same runner of a commits again after b did: b's commits are not "a newer
    # checkpoint of a" (the overtaken check, under the writer lock, is per pipeline)
    _drop(a, "a2.json", range(200, 205), now + 1)
    assert run_a.run_once().written == 5
    assert Table.open(table).read().num_rows == 125
    for name in ("from_a", "from_b"):
        history = checkpoint_history(Table.open(table).fs, table, pipeline=name)
        assert history and all(h.instant for h in history)


def test_two_pipelines_committing_concurrently_lose_nothing(tmp_path, spark):
    """10 rounds: each round both folders get a file and both pipelines run at once (two
    threads, one table: the writer lock serialises the commits, each checks its own
    position under it). Every record lands exactly once."""
    import threading

    a, b, table = tmp_path / "a", tmp_path / "b", str(tmp_path / "t")
    configs, problems = parse_pipelines(YAML.format(a=a, b=b, t=table))
    assert not problems
    runners = [PipelineRunner(c, spark=spark) for c in configs]
    base = time.time() - 1000
    expected: set[str] = set()
    for r in range(10):
        _drop(a, f"a{r}.json", range(1000 + r * 10, 1000 + r * 10 + 10), base + 2 * r)
        _drop(b, f"b{r}.json", range(5000 + r * 7, 5000 + r * 7 + 7), base + 2 * r + 1)
        expected |= {f"k{i}" for i in range(1000 + r * 10, 1000 + r * 10 + 10)}
        expected |= {f"k{i}" for i in range(5000 + r * 7, 5000 + r * 7 + 7)}
        errors: list[BaseException] = []
        threads = [threading.Thread(target=_run_into, args=(rn, errors)) for rn in runners]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
    ids = Table.open(table).read().column("id").to_pylist()
    assert len(ids) == len(set(ids)) and set(ids) == expected


def _run_into(runner: PipelineRunner, errors: list[BaseException]) -> None:
    try:
        runner.run_once()
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors.append(e)
