"""Avro container files of one record, and the schema pieces our Hudi schemas share.

Plans and rollback/clean metadata (and commit metadata from table version 8) are Avro
container files. The writer's schema travels inside the file, so :func:`read_avro` needs
none; our writers embed schemas field-compatible with Hudi's (``org.apache.hudi.avro.model``).
"""

from __future__ import annotations

import io
import itertools
from typing import Any

import fastavro

from streamer.errors import CorruptDataError

AVRO_MAGIC = b"Obj\x01"
#: Namespace of Hudi's Avro models.
NS = "org.apache.hudi.avro.model"
STRING = "string"
STR_MAP = {"type": "map", "values": "string"}
STR_ARR = {"type": "array", "items": "string"}
#: Hudi's ``version`` field of plans and metadata (``["int", "null"]``, default 1).
VERSION_FIELD: dict[str, Any] = {"name": "version", "default": 1, "type": ["int", "null"]}


def opt(t: Any) -> list[Any]:
    """The nullable union of ``t`` (``["null", t]``, null first as Hudi declares it)."""
    return ["null", t]


def deletion_head(start_field: str) -> list[dict[str, Any]]:
    """The fields a deleting action's metadata starts with (``HoodieCleanMetadata``,
    ``HoodieRollbackMetadata``): when it started, how long it took, how many files it
    deleted. Avro resolves by name, so only the names and types must match Hudi's."""
    return [{"name": start_field, "type": STRING}, {"name": "timeTakenInMillis", "type": "long"},
            {"name": "totalFilesDeleted", "type": "int"}]


def read_avro(data: bytes, path: str = "<avro>") -> tuple[dict[str, Any], dict[str, Any]]:
    """(writer schema, first record) of a single-record Avro container file."""
    try:
        reader = fastavro.reader(io.BytesIO(data))
        schema = reader.writer_schema
        first = list(itertools.islice(reader, 1))
    except Exception as e:  # fastavro raises many types on bad bytes
        raise CorruptDataError(f"unreadable Avro metadata ({e})", path) from e
    if not first:
        raise CorruptDataError("Avro metadata file holds no record", path)
    if not isinstance(schema, dict) or not isinstance(first[0], dict):
        raise CorruptDataError("Avro metadata is not a record", path)
    return schema, first[0]


def write_avro(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), [record])
    return buf.getvalue()


def read_version(record: dict[str, Any]) -> int:
    """A plan's or metadata's ``version``, null read as Hudi's schema default 1 (our
    dataclasses default to the version we write, which may be higher)."""
    return record.get("version") or 1
