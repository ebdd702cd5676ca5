"""Pipeline YAML: defaults, validation paths, every problem at once, files and folders."""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import pytest

from streamer.config import (
    ConfigValidationError,
    KafkaSourceConfig,
    load_pipelines,
    parse_pipelines,
    validate_file,
)

MINIMAL = """
pipelines:
  - name: trips
    source: {type: generator}
    target: {path: lake/trips, record_key: uuid, partition_by: city, ordering_field: ts}
"""

DESIGN_EXAMPLE = """
pipelines:
  - name: trips
    source: {type: kafka, bootstrap_servers: "${KAFKA_BOOTSTRAP}", topic: trips, format: json}
    transforms:
      - {type: sql, query: "SELECT *, to_date(from_unixtime(ts/1000)) AS day FROM {input}"}
    target: {path: lake/trips, record_key: [uuid], partition_by: [city], ordering_field: ts}
    policies:
      log_compaction: {mode: async, min_blocks: 5, small_block_bytes: 16MiB}
      compaction: {mode: async, trigger: {delta_commits: 10, seconds: 600}, strategy: log_file_size}
      clean: {retain_commits: 10}
    errors: {path: lake/_errors/trips}
    trigger: {mode: continuous, interval: 5s}
"""


def parse(text: str, env: dict[str, str] | None = None):
    return parse_pipelines(textwrap.dedent(text), file="p.yaml", env=env or {})


def problems_of(text: str, env: dict[str, str] | None = None) -> dict[str, str]:
    pipelines, problems = parse(text, env)
    assert not pipelines
    return {p.path: p.message for p in problems}


def test_design_example_is_valid_and_means_what_it_says():
    (p,), problems = parse(DESIGN_EXAMPLE, {"KAFKA_BOOTSTRAP": "broker:9092"})
    assert problems == []
    assert isinstance(p.source, KafkaSourceConfig) and p.source.bootstrap_servers == "broker:9092"
    assert p.policies.log_compaction.small_block_bytes == 16 * 2**20
    assert p.policies.compaction.trigger.seconds.total_seconds() == 600
    assert p.policies.clean.rule == ("commits", 10)
    assert p.trigger.interval.total_seconds() == 5
    assert p.target.effective_key_generator == "simple"


def test_defaults_are_filled_in_one_place():
    (p,), _ = parse(MINIMAL)
    assert p.target.record_key == ["uuid"] and p.target.partition_by == ["city"]
    assert p.target.table_name == "trips"
    assert p.errors.path == "lake/_errors/trips"
    assert p.checkpoint_dir == "lake/_checkpoints/trips"
    assert p.trigger.mode == "once" and p.engine.mode == "auto"
    assert p.target.operation == "upsert" and p.target.log_block_format == "parquet"
    assert p.policies.archive.min_commits == 20 and p.policies.clean.rule == ("commits", 10)
    assert p.target.key_generator_class.endswith("SimpleKeyGenerator")


def test_every_problem_is_reported_with_its_yaml_path_and_line():
    text = """
    pipelines:
      - name: trips
        source: {type: kafka, topic: t, bootstrap_servers: b, startng_offsets: earliest}
        transforms:
          - {type: sql, query: "SELECT 1"}
          - {type: cast}
        target: {path: lake/t, record_key: [id], partiton_by: [city], max_file_size: 12XB}
        policies:
          compaction: {trigger: {delta_commits: 0, seconds: soon}}
          clean: {retain_commits: 3, retain_file_versions: 2}
        trigger: {mode: sometimes}
        engine: fast
    """
    pipelines, problems = parse(text)
    by_path = {p.path: p for p in problems}
    assert set(by_path) == {
        "pipelines[0].source.startng_offsets",
        "pipelines[0].transforms[0].query",
        "pipelines[0].transforms[1].columns",
        "pipelines[0].target.partiton_by",
        "pipelines[0].target.max_file_size",
        "pipelines[0].policies.compaction.trigger.delta_commits",
        "pipelines[0].policies.compaction.trigger.seconds",
        "pipelines[0].policies.clean",
        "pipelines[0].trigger.mode",
        "pipelines[0].engine",
    }
    assert "did you mean 'starting_offsets'" in by_path["pipelines[0].source.startng_offsets"].message
    assert "unknown key 'partiton_by'" in by_path["pipelines[0].target.partiton_by"].message
    assert by_path["pipelines[0].target.partiton_by"].line == 8
    assert by_path["pipelines[0].policies.compaction.trigger.delta_commits"].line == 10
    assert by_path["pipelines[0].engine"].line == 13
    assert "12XB" in by_path["pipelines[0].target.max_file_size"].message
    assert str(by_path["pipelines[0].engine"]).startswith("p.yaml:13: pipelines[0].engine: ")


def test_discriminators_name_the_allowed_types():
    found = problems_of("""
    pipelines:
      - name: a
        source: {type: kafak}
        transforms: [{kind: sql}]
        target: {path: x, record_key: id, key_generator: {type: nope}}
    """)
    assert "'kafka', 'files', 'generator'" in found["pipelines[0].source.type"]
    assert "sql, flatten, rename, cast, drop, filter, derive" in found["pipelines[0].transforms[0].type"]
    assert "'timestamp'" in found["pipelines[0].target.key_generator.type"]


def test_cross_field_rules():
    found = problems_of("""
    pipelines:
      - name: a
        source: {type: kafka, bootstrap_servers: b, topic: t, format: avro}
        target: {path: x, record_key: [k1, k2], key_generator: simple}
        policies:
          clean: {retain_commits: 25}
          log_compaction: {small_block_bytes: 1GiB, max_block_bytes: 16MiB}
          archive: {min_commits: 30, max_commits: 30}
    """)
    assert "exactly one of schema_registry or avro_schema_file" in found["pipelines[0].source"]
    assert "simple needs one record_key" in found["pipelines[0].target"]
    assert "small_block_bytes" in found["pipelines[0].policies.log_compaction"]
    assert "min_commits must be less than max_commits" in found["pipelines[0].policies.archive"]


def test_archive_must_keep_more_than_clean_retains():
    found = problems_of(MINIMAL.replace("ordering_field: ts}", "ordering_field: ts}\n    policies: {clean: {retain_commits: 25}}"))
    assert "must exceed clean.retain_commits (25)" in found["pipelines[0].policies"]


def test_undefined_env_variable_is_named_with_its_path():
    found = problems_of(DESIGN_EXAMPLE)
    assert found == {
        "pipelines[0].source.bootstrap_servers": "environment variable KAFKA_BOOTSTRAP is not set (and no ${KAFKA_BOOTSTRAP:-default} given)"
    }


def test_env_values_are_typed_after_interpolation():
    text = MINIMAL + "    policies: {log_compaction: {min_blocks: \"${N:-7}\", small_block_bytes: \"${S:-1MiB}\"}}\n"
    (p,), problems = parse(text, {"N": "9"})
    assert problems == []
    assert p.policies.log_compaction.min_blocks == 9 and p.policies.log_compaction.small_block_bytes == 2**20


def test_yaml_syntax_error_has_a_line():
    _, problems = parse("pipelines:\n  - name: x\n    source: {type: generator\n  target: 1\n")
    (p,) = problems
    assert p.line == 4 and p.path == "" and "YAML syntax error" in p.message


def test_duplicate_yaml_keys_are_reported():
    found = problems_of(MINIMAL + "    name: again\n")
    assert "duplicate key 'name'" in found["pipelines[0].name"]


def test_names_are_unique_and_pipelines_sharing_a_table_agree_on_its_identity():
    text = MINIMAL + """
  - name: trips
    source: {type: generator}
    target: {path: lake/trips/, record_key: uuid}
"""
    found = problems_of(text)
    assert "already used by pipelines[0]" in found["pipelines[1].name"]
    assert "must agree" in found["pipelines[1].target"]
    # two pipelines, one table, the same keys: allowed (each has its own position)
    shared = MINIMAL + """
  - name: trips_backfill
    source: {type: generator}
    target: {path: lake/trips/, record_key: uuid, partition_by: city, ordering_field: ts}
"""
    pipelines, problems = parse(shared, None)
    assert problems == [] and [p.name for p in pipelines] == ["trips", "trips_backfill"]


def test_empty_and_wrong_top_level():
    assert problems_of("") == {"": "file is empty; expected 'pipelines: [...]'"}
    assert "pipelines" in problems_of("pipelines: []")
    assert "unknown key 'pipeline'" in problems_of("pipeline: []")["pipeline"]


def test_folder_is_multi_table_and_checked_across_files(tmp_path: Path):
    (tmp_path / "a.yaml").write_text(textwrap.dedent(MINIMAL))
    (tmp_path / "b.yml").write_text(textwrap.dedent(MINIMAL).replace("lake/trips", "lake/other"))
    (tmp_path / "notes.txt").write_text("ignored")
    problems = validate_file(tmp_path, env={})
    assert [(Path(p.file).name, p.path) for p in problems] == [("b.yml", "pipelines[0].name")]
    (tmp_path / "b.yml").write_text(textwrap.dedent(MINIMAL).replace("trips", "rides"))
    assert [p.name for p in load_pipelines(tmp_path, env={})] == ["trips", "rides"]


def test_load_raises_with_all_problems(tmp_path: Path):
    f = tmp_path / "bad.yaml"
    f.write_text("pipelines:\n  - name: 1bad\n    source: {type: generator}\n    target: {path: p}\n")
    with pytest.raises(ConfigValidationError) as exc:
        load_pipelines(f, env={})
    paths = {p.path for p in exc.value.problems}
    assert paths == {"pipelines[0].name", "pipelines[0].target.record_key"}
    assert str(f) in str(exc.value)
    assert validate_file(tmp_path / "missing.yaml")[0].message == "no such file or folder"


def test_avro_schema_file_is_resolved_relative_to_the_yaml(tmp_path: Path):
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "t.avsc").write_text('{"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}]}')
    (tmp_path / "p.yaml").write_text(textwrap.dedent("""
    pipelines:
      - name: t
        source: {type: kafka, bootstrap_servers: b, topic: t, format: avro, avro_schema_file: schemas/t.avsc}
        target: {path: lake/t, record_key: a}
      - name: u
        source: {type: kafka, bootstrap_servers: b, topic: u, format: avro, avro_schema_file: schemas/missing.avsc}
        target: {path: lake/u, record_key: a}
    """))
    (problem,) = validate_file(tmp_path / "p.yaml", env={})
    assert problem.path == "pipelines[1].source.avro_schema_file" and "cannot read" in problem.message
    (tmp_path / "p.yaml").write_text((tmp_path / "p.yaml").read_text().split("  - name: u")[0])
    (p,) = load_pipelines(tmp_path / "p.yaml", env={})
    assert p.source.avro_schema_file == str(tmp_path / "schemas" / "t.avsc")


def test_loading_logs_nothing_secret(tmp_path: Path, caplog):
    f = tmp_path / "p.yaml"
    f.write_text(MINIMAL)
    with caplog.at_level(logging.DEBUG):
        load_pipelines(f, env={})
    assert "loaded 1 pipeline" in caplog.text


def test_an_alias_bomb_is_refused_quickly():
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
    for i in range(1, 10):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        bomb += f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]\n"
    bomb += "pipelines: *j\n"
    found = problems_of(bomb)  # 10^10 values if expanded: the walk stops at the limit
    assert any("nested aliases" in m for m in found.values()), found


def test_an_oversized_file_is_refused():
    found = problems_of("pipelines: []\n" + "#" * 1_100_000)
    assert any("at most" in m for m in found.values()), found


def test_a_bad_unavailable_value_placeholder_is_named_with_its_line():
    pipelines, problems = parse("""
    pipelines:
      - name: a
        source: {type: kafka, bootstrap_servers: b, topic: t, debezium: postgres,
                 unavailable_value_placeholder: "hex:zz"}
        target: {path: x, record_key: [id]}
    """)
    assert not pipelines
    (p,) = problems
    assert p.path == "pipelines[0].source.unavailable_value_placeholder" and p.line == 5
    assert "not hexadecimal after 'hex:'" in p.message
    (ok,), none = parse("""
    pipelines:
      - name: a
        source: {type: kafka, bootstrap_servers: b, topic: t, debezium: postgres, unavailable_value_placeholder: "~t~"}
        target: {path: x, record_key: [id]}
    """)
    assert not none and ok.source.unavailable_value_placeholder == "~t~"


@pytest.mark.parametrize(("transforms", "reads"), [
    ("[]", False),
    ("[{type: flatten}, {type: rename, columns: {a: b}}, {type: cast, columns: {b: int}}, "
     "{type: drop, columns: [c]}]", False),
    ("[{type: rename, columns: {a: b}}, {type: sql, query: 'SELECT * FROM {input}'}]", True),
    ("[{type: filter, condition: 'a > 1'}]", True),
    ("[{type: derive, columns: {d: 'a + 1'}}]", True),
    ("[{type: python, callable: 'json:dumps'}]", True),
])
def test_only_sql_text_or_user_code_may_read_a_table(transforms, reads):
    """Which pipelines' sessions register the ``morhudi`` reader (``streamer.spark.get_spark``)."""
    (p,), problems = parse(MINIMAL + f"    transforms: {transforms}\n")
    assert problems == []
    assert p.may_read_tables() is reads
