"""The same YAML pipeline - generator with updates and deletes, inline log compaction,
compaction, clean and archive - into a table of version 6 and one of version 9: both
read the same rows, and the version-9 table is laid out as version 9 with every service
having run (Hudi 1.x reading such tables: tests/hudi_jvm/test_table_versions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.cli import main as cli
from streamer.read import Table

pytestmark = [pytest.mark.integration]

YAML = """
pipelines:
  - name: trips_v{version}
    source:
      type: generator
      seed: 7
      records_per_batch: 400
      num_batches: 12
      num_keys: 1500
      update_ratio: 0.3
      delete_ratio: 0.05
      partition_field: city
      partitions: [sf, nyc, oslo]
    target:
      path: {root}/v{version}
      record_key: [uuid]
      partition_by: [city]
      ordering_field: ts
      table_version: {version}
      small_file_limit: 40KiB
      max_file_size: 80KiB
    policies:
      log_compaction: {{mode: inline, min_blocks: 3, small_block_bytes: 4MiB}}
      compaction: {{mode: inline, trigger: {{delta_commits: 4}}, strategy: log_file_size}}
      clean: {{retain_commits: 2}}
      archive: {{min_commits: 4, max_commits: 6}}
    trigger: {{mode: available_now}}
    engine: local
"""


def _rows(path: str) -> list[tuple]:
    t = Table.open(path).read()
    cols = [c for c in t.column_names if not c.startswith("_hoodie_")]
    return sorted(tuple(r[c] for c in cols) for r in t.to_pylist())


def test_the_same_pipeline_at_version_6_and_9_reads_the_same_rows(tmp_path: Path):
    for version in (6, 9):
        yaml = tmp_path / f"v{version}.yaml"
        yaml.write_text(YAML.format(version=version, root=tmp_path))
        assert cli(["run", str(yaml)]) == 0
    v6, v9 = Table.open(str(tmp_path / "v6")), Table.open(str(tmp_path / "v9"))
    assert (v6.properties.version, v9.properties.version) == (6, 9)
    assert v9.timeline.layout_version == 2
    actions = {i.action for i in v9.timeline.completed()}
    assert {"deltacommit", "commit", "clean"} <= actions, actions  # compaction and clean ran
    assert any(i.is_log_compaction for i in v9.timeline.completed()), "no log compaction ran"
    assert _rows(str(tmp_path / "v6")) == _rows(str(tmp_path / "v9"))
    assert cli(["check", str(tmp_path / "v9")]) == 0
