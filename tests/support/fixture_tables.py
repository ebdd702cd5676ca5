"""The Hudi-written fixture tables and the canonical form they are compared in.

The canonical form is the fixtures README's: meta columns `_hoodie_commit_seqno` and
`_hoodie_file_name` dropped, keys sorted, values through `json.dumps(default=str)`, rows
sorted by (partition path, record key, line). :func:`canonical_lines` is the one
canonicaliser every conformance and integration test uses. The zips are unzipped once
per session by the ``hudi_fixtures_dir`` fixture (``tests/conftest.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures" / "hudi"

FIXTURE_NAMES = sorted(p.stem for p in FIXTURES.glob("*.zip"))
QUERIES = ("snapshot", "read_optimized")
_DROPPED = ("_hoodie_commit_seqno", "_hoodie_file_name")


def fixture_table_path(fixtures_dir: Path, name: str) -> Path:
    """The single top-level table folder inside an unzipped fixture."""
    folders = [p for p in (fixtures_dir / name).iterdir() if p.is_dir()]
    if len(folders) != 1:
        raise AssertionError(f"fixture {name}: expected one top-level folder, got {folders}")
    return folders[0]


def table_path(fixtures_dir: Path, name: str) -> str:
    """:func:`fixture_table_path` as a string, as the readers take it."""
    return str(fixture_table_path(fixtures_dir, name))


def canonical_lines(rows: list[dict]) -> list[str]:
    """Rows (as `to_pylist()` gives them) in the README's canonical JSONL form."""
    keyed = []
    for row in rows:
        row = {k: v for k, v in row.items() if k not in _DROPPED}
        line = json.dumps(row, sort_keys=True, default=str)
        if "_hoodie_record_key" in row:
            keyed.append((str(row.get("_hoodie_partition_path")), str(row["_hoodie_record_key"]), line))
        else:
            keyed.append(("", "", line))
    return [line for *_, line in sorted(keyed)]


def expected_lines(name: str, query: str) -> list[str]:
    """The fixture's `expected/<name>.<query>.jsonl`, line by line."""
    return (FIXTURES / "expected" / f"{name}.{query}.jsonl").read_text().splitlines()
