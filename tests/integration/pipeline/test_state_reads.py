"""Issue 11 acceptance 1: a steady-state micro-batch reads the table's state once.

Counted through the filesystem seam (:class:`streamer.fs.FileSystem`) while a pipeline
runs batch after batch: listings of ``.hoodie/`` (or walks that would cover it) and reads
of ``hoodie.properties``. The steady path is a batch that commits and whose inline
services have nothing to do: one listing (the writer's refresh under its lock) and no
properties read.
"""

from __future__ import annotations

import posixpath
from collections import Counter

import pytest

from streamer.config import parse_pipelines
from streamer.fs import FileSystem
from streamer.pipeline.runner import PipelineRunner
from streamer.pipeline.services import PipelineServices

pytestmark = pytest.mark.integration

YAML = """
pipelines:
  - name: steady
    source: {{type: generator, seed: 7, records_per_batch: 200, num_batches: 8, num_keys: 2000,
              update_ratio: 0.3, delete_ratio: 0.0, partition_field: city, partitions: [a, b]}}
    target: {{path: "{path}", record_key: [uuid], partition_by: [city], ordering_field: ts}}
    policies:
      log_compaction: {{mode: inline, min_blocks: 50}}
      compaction: {{mode: inline, trigger: {{delta_commits: 50}}}}
      clean: {{retain_commits: 50}}
      archive: {{min_commits: 60, max_commits: 70}}
    trigger: {{mode: once}}
    engine: local
"""


class _Counting:
    def __init__(self, base: str) -> None:
        self.meta = posixpath.join(base.rstrip("/"), ".hoodie")
        self.base = base.rstrip("/")
        self.counts: Counter[str] = Counter()

    def install(self, monkeypatch) -> None:
        list_dir, walk, read_bytes, read_text = (FileSystem.list_dir, FileSystem.walk_files,
                                                 FileSystem.read_bytes, FileSystem.read_text)
        me = self

        def counted_list(fs, path):
            if path.rstrip("/") == me.meta:
                me.counts["list .hoodie"] += 1
            return list_dir(fs, path)

        def counted_walk(fs, path):
            if path.rstrip("/") in (me.meta, me.base):
                me.counts["walk covering .hoodie"] += 1
            return walk(fs, path)

        def counted_bytes(fs, path):
            if path.endswith("/.hoodie/hoodie.properties") and path.startswith(me.base):
                me.counts["read hoodie.properties"] += 1
            return read_bytes(fs, path)

        def counted_text(fs, path, *a, **k):
            if path.endswith("/.hoodie/hoodie.properties") and path.startswith(me.base):
                me.counts["read hoodie.properties"] += 1
            return read_text(fs, path, *a, **k)

        monkeypatch.setattr(FileSystem, "list_dir", counted_list)
        monkeypatch.setattr(FileSystem, "walk_files", counted_walk)
        monkeypatch.setattr(FileSystem, "read_bytes", counted_bytes)
        monkeypatch.setattr(FileSystem, "read_text", counted_text)


def test_steady_micro_batch_lists_hoodie_once_and_reads_no_properties(tmp_path, spark, monkeypatch):
    path = str(tmp_path / "t")
    (config,), problems = parse_pipelines(YAML.format(path=path))
    assert not problems
    runner = PipelineRunner(config, spark=spark)
    services = PipelineServices.for_runner(runner)
    runner.attach_services(services)
    for _ in range(2):  # create the table, then one batch to settle
        assert runner.run_once().instant
    counter = _Counting(runner.sink.path)
    counter.install(monkeypatch)
    per_batch = []
    for _ in range(3):
        counter.counts.clear()
        assert runner.run_once().instant
        per_batch.append(dict(counter.counts))
    services.close()
    for counts in per_batch:
        assert counts.get("list .hoodie", 0) == 1, per_batch
        assert counts.get("walk covering .hoodie", 0) == 0, per_batch
        assert counts.get("read hoodie.properties", 0) == 0, per_batch
