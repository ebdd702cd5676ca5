"""Spark's per-run checkpoint folder: local, whatever URI names it (it is scratch; the
position lives in the table's commits)."""

from __future__ import annotations

import os
import tempfile

from streamer.pipeline.stream import _RUN_PREFIX, _fresh_checkpoint


def test_file_uri_names_the_local_folder_and_dead_runs_are_removed(tmp_path):
    dead = tmp_path / f"{_RUN_PREFIX}999999999-abc"
    dead.mkdir()
    got = _fresh_checkpoint(f"file:{tmp_path}")
    assert got.startswith(str(tmp_path) + "/" + _RUN_PREFIX) and str(os.getpid()) in got
    assert not dead.exists()


def test_object_store_checkpoint_dir_becomes_a_local_temp_folder():
    got = _fresh_checkpoint("s3://lake-bucket/lake/_checkpoints/p")
    assert got.startswith(os.path.join(tempfile.gettempdir(), "mor-streamer-checkpoints",
                                       "lake-bucket/lake/_checkpoints/p"))
    assert "://" not in got
