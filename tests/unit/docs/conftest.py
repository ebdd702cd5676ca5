"""One run of the README's examples per session: the local demo table the docs tests share.

``streamer demo`` is the README's first command; its table (``lake/demo``) is what the
following commands show, and what the demo tests check. It runs once per storage kind in
the suite: here on a local folder, and ``tests/integration/s3/test_demo_s3.py`` on S3.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.doc_examples import Ran, run_examples

REPO = Path(__file__).resolve().parents[3]
DEMO = "lake/demo"


def demo_state(_: Ran) -> dict:
    """The demo table after a command: its timeline, and its rows as hudi-rs reads them
    (an independent reader), keyed by ``uuid``, without the meta columns."""
    import hudi
    import pyarrow as pa

    from streamer.read import Table

    if not (Path(DEMO) / ".hoodie" / "hoodie.properties").is_file():
        return {}
    table = Table.open(DEMO)
    batches = hudi.HudiTableBuilder.from_base_uri(str(Path(DEMO).resolve())).build().read()
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    return {
        "instants": [(i.timestamp, i.action, i.state.name) for i in table.timeline.instants],
        "completed": [(i.timestamp, i.action) for i in table.timeline.completed()],
        # the data columns: services rewrite files (``_hoodie_file_name``), never the data
        "rows": {r["uuid"]: {k: v for k, v in r.items() if not k.startswith("_hoodie_")} for r in rows},
    }


@pytest.fixture(scope="session")
def readme_run(spark, tmp_path_factory) -> Iterator[tuple[Path, list[Ran]]]:
    """The README's examples, run once in a fresh folder with the repository's names
    (``.venv``, ``configs``): the folder and what each command showed."""
    cwd = tmp_path_factory.mktemp("readme")
    (cwd / ".venv").symlink_to(Path(sys.executable).parent.parent)
    (cwd / "configs").symlink_to(REPO / "configs")
    yield cwd, run_examples(REPO / "README.md", cwd, observe=demo_state)
