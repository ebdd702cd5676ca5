"""``target.catalog`` in YAML: validated, with clear errors naming the setting."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from streamer.config.target import TargetConfig


def _target(**catalog):
    return TargetConfig(path="/lake/t", record_key="id", catalog={"type": "hive", **catalog})


def test_defaults_follow_hudi():
    c = _target(uri="thrift://127.0.0.1:9083").catalog
    assert (c.database, c.table, c.skip_ro_suffix, c.sync_as_datasource, c.support_timestamp) == (
        "default", None, False, True, False)
    assert c.schema_string_length_threshold == 4000
    assert c.timeout.total_seconds() == 30


def test_no_catalog_by_default():
    assert TargetConfig(path="/lake/t", record_key="id").catalog is None


@pytest.mark.parametrize(("catalog", "message"), [
    ({"uri": "http://h:9083"}, "must be thrift://host:port"),
    ({"uri": "thrift://h"}, "must be thrift://host:port"),
    ({"uri": "thrift://h:1", "database": "bad-name"}, "Hive name"),
    ({"uri": "thrift://h:1", "table": "a.b"}, "Hive name"),
    ({"uri": "thrift://h:1", "unknown": 1}, "unknown"),
    ({"uri": "thrift://h:1", "schema_string_length_threshold": 10}, "greater than or equal"),
])
def test_bad_settings_are_refused(catalog, message):
    with pytest.raises(ValidationError, match=message):
        _target(**catalog)


def test_unknown_catalog_type_is_refused():
    with pytest.raises(ValidationError, match="hive"):
        TargetConfig(path="/t", record_key="id", catalog={"type": "glue", "uri": "thrift://h:1"})
