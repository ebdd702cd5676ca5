"""One config mapping: ``target:``/``engine:`` -> ``TableConfig`` + ``WriteOptions``, in the sink.

Every ``target:`` key is either read by that mapping (a non-default value changes what
the writer gets), used by the runner, or refused at validation; shared defaults agree
because both sides import them from :mod:`streamer.defaults`; the engine is decided once.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import ValidationError

import streamer.config.target as target_module
from streamer import defaults
from streamer.config.pipeline import EngineConfig
from streamer.config.target import TargetConfig, TimestampKeyGen
from streamer.errors import ConfigError
from streamer.pipeline.sink import _check_identity, engine_for, table_config, write_options
from streamer.table.identity import KeyGenType, TableConfig
from streamer.table.log_format import LogBlockFormat
from streamer.write.config import WriteOptions
from streamer.write.engine import select_engine

BASE = {"path": "lake/t", "record_key": "id", "table_name": "t"}

#: key -> (a non-default value, what the writer then gets)
MAPPED = {
    "record_key": (["a", "b"], lambda tc, wo: tc.record_key_fields == ("a", "b")),
    "partition_by": (["p", "q"], lambda tc, wo: tc.partition_fields == ("p", "q")),
    "ordering_field": ("ts", lambda tc, wo: tc.ordering_field == "ts"),
    "table_name": ("other", lambda tc, wo: tc.name == "other"),
    "key_generator": ("complex", lambda tc, wo: tc.keygen is KeyGenType.COMPLEX),
    "hive_style": (True, lambda tc, wo: tc.hive_style_partitioning),
    "table_version": (9, lambda tc, wo: tc.table_version == 9),
    "log_block_format": ("avro", lambda tc, wo: tc.log_block_format is LogBlockFormat.AVRO),
    "compression": ("zstd", lambda tc, wo: wo.parquet_codec == "zstd"),
    "max_file_size": ("1GiB", lambda tc, wo: wo.max_file_size == 1024**3),
    "small_file_limit": ("1MiB", lambda tc, wo: wo.small_file_limit == 1024**2),
    "log_block_max_size": ("1MiB", lambda tc, wo: wo.log_block_max_size == 1024**2),
    "url_encode_partitions": (True, lambda tc, wo: tc.url_encode_partitions),
    "index": ({"type": "bucket", "num_buckets": 4}, lambda tc, wo: tc.index.num_buckets == 4),
    "lock_timeout": ("2s", lambda tc, wo: wo.lock_timeout_s == 2.0),
}
#: keys refused when set (the reason is in the model's validator)
REFUSED = {"log_file_max_size": "1GiB"}
#: keys used outside the mapping: the sink opens ``path``; the runner calls ``operation``;
#: ``catalog`` is the runner's after-commit sync (streamer.catalog.hook, tests/integration/catalog);
#: ``filter_dupes`` is the batch step's (streamer.pipeline.dupes, tests/unit/pipeline/test_dupes.py);
#: ``conflict_retries`` the runner's (tests/integration/pipeline/test_commit_conflicts.py)
ELSEWHERE = {"path", "operation", "catalog", "filter_dupes", "conflict_retries"}


def test_every_target_key_is_mapped_used_or_refused():
    assert set(TargetConfig.model_fields) == set(MAPPED) | set(REFUSED) | ELSEWHERE


@pytest.mark.parametrize("key", sorted(MAPPED))
def test_each_mapped_key_changes_what_the_writer_gets(key):
    value, took_effect = MAPPED[key]
    default = TargetConfig(**BASE)
    changed = TargetConfig(**{**BASE, key: value})
    engine = EngineConfig()
    assert not took_effect(table_config(default), write_options(default, engine))
    assert took_effect(table_config(changed), write_options(changed, engine))


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_each_refused_key_is_refused_at_validation(key):
    with pytest.raises(ValidationError, match=f"{key} is not supported"):
        TargetConfig(**{**BASE, key: REFUSED[key]})


def test_one_key_generator_table():
    assert not hasattr(target_module, "KEY_GENERATOR_CLASSES")
    assert not hasattr(TargetConfig, "hudi_properties")  # the sink is the one mapping
    for kind, extra in [
        ("simple", {"partition_by": "p"}),
        ("complex", {}),
        ("non_partitioned", {}),
        ("timestamp", {"partition_by": "p"}),
    ]:
        t = TargetConfig(**{**BASE, **extra, "key_generator": kind})
        assert t.key_generator_class == KeyGenType.parse(kind).value
        assert KeyGenType.parse(kind).short_name == kind
        assert table_config(t).keygen is KeyGenType.parse(kind)


def test_identity_mismatch_names_the_yaml_spelling():
    on_disk = table_config(TargetConfig(**BASE))
    wanted = table_config(TargetConfig(**{**BASE, "key_generator": "complex"}))
    with pytest.raises(ConfigError, match="target.key_generator is 'complex'.*'non_partitioned'"):
        _check_identity("lake/t", on_disk, wanted)


def test_timestamp_types_the_writer_lacks_are_refused_at_validation():
    for kind in ("EPOCHMICROSECONDS", "SCALAR"):
        with pytest.raises(ValidationError, match=f"timestamp_type {kind} is not supported"):
            TimestampKeyGen(type="timestamp", timestamp_type=kind)
    with pytest.raises(ValidationError, match="scalar_time_unit"):  # no longer a key
        TimestampKeyGen(type="timestamp", scalar_time_unit="SECONDS")


def test_shared_defaults_agree():
    target, engine = TargetConfig(**BASE), EngineConfig()
    assert write_options(target, engine) == WriteOptions()
    assert table_config(target) == TableConfig("t", ("id",), keygen=KeyGenType.NON_PARTITIONED)
    assert engine.local_max_records == WriteOptions().auto_local_max_rows == defaults.LOCAL_MAX_ROWS
    assert engine.local_threads == WriteOptions().parallelism == defaults.LOCAL_THREADS


def test_the_engine_settings_reach_the_writer():
    engine = EngineConfig(mode="spark", local_max_records=10, local_threads=2)
    o = write_options(TargetConfig(**BASE), engine)
    assert (o.engine, o.auto_local_max_rows, o.parallelism) == ("spark", 10, 2)


@pytest.mark.integration
def test_the_engine_is_decided_once(spark, monkeypatch):
    """A real DataFrame (the writer tells batches apart by type, not by duck typing)."""
    big = spark.range(10)
    counts = []
    real_count = type(big).count
    monkeypatch.setattr(type(big), "count", lambda self: counts.append(1) or real_count(self))
    arrow = pa.table({"id": [1]})
    auto = EngineConfig(mode="auto", local_max_records=5)
    # the batch step kept a DataFrame (too big for the driver) or collected Arrow
    assert engine_for(big, auto) == "spark" and engine_for(arrow, auto) == "local"
    assert engine_for(big, EngineConfig(mode="local")) == "local"
    assert engine_for(arrow, EngineConfig(mode="spark")) == "spark"

    options = write_options(TargetConfig(**BASE), auto)
    assert select_engine(engine_for(big, auto), big, options).name == "spark"
    assert not counts  # named explicitly: no second row count
    # left to ``auto``, the writer counts with the same threshold
    assert select_engine("auto", big, options).name == "spark" and len(counts) == 1
    assert select_engine("auto", spark.range(5), options).name == "local"


def test_the_writer_passes_the_block_limit_to_every_file_group_write(tmp_path):
    from streamer.write import HudiWriter, TableConfig
    from streamer.write.state import TableState

    engine = select_engine("local", None, WriteOptions(log_block_max_size=1234, parallelism=3))
    assert engine.name == "local" and engine.parallelism == 3
    w = HudiWriter.create(str(tmp_path / "t"), TableConfig("t", ("id",), ()),
                          options=WriteOptions(log_block_max_size=1234))
    ctx = w._context(TableState.load(w.fs, w.base_path), "20260101000000000", pa.schema([("id", pa.int64())]))
    assert ctx.log_block_max_size == 1234
