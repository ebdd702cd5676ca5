"""The README claims only the readers a test runs.

The README's ``<!-- engines -->`` table names each engine said to read our tables and the
test(s) that read with it. This test holds that table to a list kept here, engine by engine,
with what in each test file shows it reads with that engine; and it fails when README.md or
a document under docs/ names a query engine that no test runs in a paragraph that does not
also say it is not tested. A future claim ("X reads them") then needs a test, or the words
"not run by the tests".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import hudi as oracle

REPO = Path(__file__).resolve().parents[3]

#: engine (as the README's table names it) -> what in its test files shows it reads with it
TESTED: dict[str, tuple[str, ...]] = {
    # Apache Hudi's own Spark reader, per version the Hudi tier runs (tests.support.hudi)
    "Apache Hudi {versions} (Spark)": (r"hudi_sessions|HudiSpark",),
    "hudi-rs": (r"HudiTableBuilder|read_hudi_rs|hudi\.HudiTable",),
    "Spark (`morhudi` data source)": (r"format\(\"morhudi\"\)",),
    "Spark SQL by name (Hive metastore)": (r"hive_metastore", r"HudiSpark"),
}

#: Query engines that read Hudi tables elsewhere but that no test here runs. Naming one is
#: allowed only in a paragraph that says so.
UNTESTED = ("Trino", "Presto", "Athena", "Impala", "Flink", "StarRocks", "Doris", "Dremio", "DuckDB",
            "Redshift", "BigQuery", "Snowflake", "Databricks", "Daft", "Polars")
SAYS_UNTESTED = re.compile(r"not\s+run\s+by\s+(this\s+project's\s+|the\s+)?tests|not\s+tested|untested"
                           r"|the\s+tests\s+do\s+not\s+run", re.IGNORECASE)
#: Documents that mention engines for other reasons: the format audit cites Hudi's Flink code.
NOT_CLAIMS = {"docs/hudi-format-audit.md", "docs/options.md"}


def _engine_rows() -> list[tuple[str, list[str]]]:
    text = (REPO / "README.md").read_text()
    m = re.search(r"<!-- engines -->\n(.*?)<!-- /engines -->", text, re.S)
    assert m, "README.md has no <!-- engines --> table"
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("engine", "") or set(cells[0]) <= {"-", " "}:
            continue
        rows.append((cells[0], re.findall(r"`(tests/[^`]+)`", cells[2])))
    return rows


def _expected_name(name: str) -> str:
    return name.format(versions=oracle.spoken())


def test_the_readme_lists_exactly_the_tested_engines():
    assert [e for e, _ in _engine_rows()] == [_expected_name(n) for n in TESTED]


@pytest.mark.parametrize("engine", list(TESTED))
def test_each_listed_engine_has_a_test_that_reads_with_it(engine):
    rows = dict(_engine_rows())
    name = _expected_name(engine)
    assert name in rows, f"README's engines table has no row {name!r}"
    paths = rows[name]
    assert paths, f"{name}: no test named"
    for rel in paths:
        path = REPO / rel
        assert path.is_file(), f"{name}: {rel} does not exist"
        source = path.read_text()
        assert re.search(r"^def test_", source, re.M), f"{name}: {rel} holds no test"
    sources = "\n".join((REPO / rel).read_text() for rel in paths)
    for evidence in TESTED[engine]:
        assert re.search(evidence, sources), f"{name}: nothing in {paths} reads with it ({evidence!r})"


def test_the_readme_intro_names_the_tested_engines():
    intro = (REPO / "README.md").read_text().split("\n## ", 1)[0]
    for short in ("Apache Hudi " + oracle.spoken(), "hudi-rs", "Spark", "Hive metastore"):
        assert short in intro, short


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def test_no_document_claims_an_engine_no_test_runs():
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    claims = []
    for doc in docs:
        rel = doc.relative_to(REPO).as_posix()
        if rel in NOT_CLAIMS:
            continue
        for para in _paragraphs(doc.read_text()):
            named = [e for e in UNTESTED if re.search(rf"\b{e}\b", para)]
            if named and not SAYS_UNTESTED.search(para):
                claims.append(f"{rel}: {', '.join(named)} in: {para.strip()[:300]!r}")
    assert not claims, ("engines no test runs, named without saying so (add a test and a row to the "
                        "README's engines table, or say 'not run by the tests'):\n" + "\n".join(claims))
