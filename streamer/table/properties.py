"""``.hoodie/hoodie.properties``: the table's identity card.

Every Hudi reader opens this file first (table type, version, key fields, layout), so
we read and write it exactly as Java's ``java.util.Properties`` does: the same
escaping (``\\:`` for colons in the embedded Avro schema), the same comment lines,
and the same ``hoodie.table.checksum`` that Hudi validates on load. The checksum is
CRC32 over ``"<database>.<table name>"`` (database empty when unset) and was
checked against every fixture table.
"""

from __future__ import annotations

import datetime as _dt
import posixpath
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from streamer.errors import CorruptDataError, NotAHudiTableError, UnsupportedTableVersionError
from streamer.fs import FileSystem

# Every key's name, default and versions live in the registry (table_keys); imported
# here so the typed accessors below are the one place that reads them.
from streamer.table.table_keys import (
    ARCHIVELOG_FOLDER,
    BASE_FILE_FORMAT,
    BUCKET_HASH_FIELD,
    BUCKET_NUM_BUCKETS,
    CDC_ENABLED,
    CHECKSUM,
    CREATE_SCHEMA,
    DATABASE_NAME,
    DROP_PARTITION_COLUMNS,
    HIVE_STYLE_PARTITIONING,
    INDEX_TYPE,
    INITIAL_VERSION,
    KEYGEN_CLASS,
    KEYGEN_TYPE,
    KEYGEN_TYPE_CLASSES,
    LOG_FILE_FORMAT,
    MERGE_STRATEGY_ID,
    MERGER_STRATEGY,
    ORDERING_FIELDS,
    PARTIAL_UPDATE_MODE,
    PARTITION_FIELDS,
    PARTITION_METAFILE_BASE_FORMAT,
    PAYLOAD_CLASS,
    POPULATE_META_FIELDS,
    PRECOMBINE_FIELD,
    RECORD_KEY_FIELDS,
    RECORD_MERGE_MODE,
    REGISTRY,
    TABLE_FORMAT,
    TABLE_NAME,
    TABLE_TYPE,
    TABLE_VERSION,
    TIMELINE_HISTORY_PATH,
    TIMELINE_LAYOUT_VERSION,
    TIMELINE_PATH,
    TIMELINE_TIMEZONE,
    TS_INPUT_FMT,
    TS_OUTPUT_FMT,
    TS_TIMEZONE,
    TS_TYPE,
    URL_ENCODE_PARTITIONING,
)

METAFOLDER = ".hoodie"
PROPERTIES_FILE = "hoodie.properties"
OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
#: Hudi's ``HoodieRecordMerger.DEFAULT_MERGE_STRATEGY_UUID`` (payload-based merging).
DEFAULT_MERGER_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
#: Payload classes whose merge rule is event time or commit time (what we merge by).
STANDARD_PAYLOADS = frozenset({
    DEFAULT_PAYLOAD, OVERWRITE_PAYLOAD, "org.apache.hudi.common.model.EventTimeAvroPayload",
})
#: The only log *file* format Hudi has (``HoodieFileFormat.HOODIE_LOG``, extension ``.log``).
HOODIE_LOG = "HOODIE_LOG"

#: Table versions whose data files we can read (layout 1 for 6, layout 2 for 8/9).
READABLE_VERSIONS = frozenset({5, 6, 8, 9})
#: The version our writer produces unless told otherwise (see docs/table-versions.md).
WRITE_VERSION = 6
#: The versions our writer writes.
WRITABLE_VERSIONS = (6, 8, 9)
#: ``hoodie.record.merge.strategy.id`` of commit-time ordering (Hudi's
#: ``COMMIT_TIME_BASED_MERGE_STRATEGY_UUID``); event time's is :data:`DEFAULT_MERGER_STRATEGY`.
COMMIT_TIME_MERGER_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"


# --------------------------------------------------------------------------- Java properties
def parse_java_properties(text: str) -> dict[str, str]:
    """Parse ``java.util.Properties.load`` syntax into an ordered dict.

    Handles comments (``#``/``!``), continuation lines (trailing odd backslash),
    ``=``/``:``/whitespace separators and the escapes ``\\t \\n \\r \\f \\uXXXX``.
    """
    out: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_key_value(logical)
        out[_unescape(key)] = _unescape(value)
    return out


def _logical_lines(text: str) -> Iterator[str]:
    buf: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")  # continuation lines lose leading blanks too
        if not buf and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buf.append(line[:-1])
            continue
        buf.append(line)
        yield "".join(buf)
        buf = []
    if buf:
        yield "".join(buf)


def _split_key_value(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
#: A backslash and what it escapes: ``\uXXXX`` (four characters after the ``u``, else the
#: ``u`` alone) or any one character; a backslash at the very end stays as it is.
_BACKSLASH_ESCAPE = re.compile(r"\\(u.{4}|.)", re.DOTALL)


def _unescaped(m: re.Match[str]) -> str:
    """One escape of :data:`_BACKSLASH_ESCAPE` as Java's ``Properties.load`` reads it (bad
    hex after ``\\u`` raises, as Java's "Malformed \\uxxxx encoding" does)."""
    code = m[1]
    if len(code) == 5:
        return chr(int(code[1:], 16))
    return _ESCAPES.get(code, code)


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    text = _BACKSLASH_ESCAPE.sub(_unescaped, s)
    # Java escapes a character beyond the BMP as a UTF-16 surrogate pair: join the halves
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _escape(s: str, is_key: bool) -> str:
    """Java's ``Properties.saveConvert`` for the OutputStream (ISO-8859-1) variant."""
    out: list[str] = []
    for idx, c in enumerate(s):
        o = ord(c)
        if c == "\\":
            out.append("\\\\")
        elif c == " ":
            out.append("\\ " if idx == 0 or is_key else " ")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c in "=:#!":
            out.append("\\" + c)
        elif o < 0x20 or o > 0x7E:
            if o > 0xFFFF:  # Java writes UTF-16 surrogate pairs
                hi, lo = divmod(o - 0x10000, 0x400)
                out.append(f"\\u{0xD800 + hi:04X}\\u{0xDC00 + lo:04X}")
            else:
                out.append(f"\\u{o:04X}")
        else:
            out.append(c)
    return "".join(out)


def format_java_properties(
    props: Mapping[str, str], comment: str | None = None, now: _dt.datetime | None = None
) -> str:
    """Render like ``Properties.store(OutputStream, comment)``: comment, date line, entries."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    lines = []
    if comment is not None:
        # Java's Properties.writeComments: every line of a comment starts with '#'
        lines.append("#" + "\n#".join(comment.splitlines() or [""]))
    # java.util.Date.toString(): "EEE MMM dd HH:mm:ss zzz yyyy"
    lines.append("#" + now.strftime("%a %b %d %H:%M:%S UTC %Y"))
    for k, v in props.items():
        lines.append(f"{_escape(k, True)}={_escape(v, False)}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- checksum
def table_checksum(table_name: str, database: str | None = None) -> int:
    """Hudi's ``hoodie.table.checksum``: CRC32 of ``"<database>.<table>"``."""
    return zlib.crc32(f"{database or ''}.{table_name}".encode())


# --------------------------------------------------------------------------- typed view
def _split_fields(value: str | None) -> tuple[str, ...]:
    """A comma-separated field list: blanks around names and empty items dropped.

    Hudi's ``HoodieTableConfig`` splits on ``,`` and drops empty items; its key
    generators also trim each name, so a hand-edited ``id, name`` keys on ``name``.
    """
    if not value:
        return ()
    return tuple(f.strip() for f in value.split(",") if f.strip())


@dataclass
class TableProperties:
    """The parsed ``hoodie.properties``: raw key/values plus typed accessors.

    The only reader of the file's keys: everything else (the writer's
    :class:`~streamer.table.identity.TableConfig` included) asks these accessors, so a
    table reads the same way everywhere. Each accessor follows the rule Apache Hudi's
    ``HoodieTableConfig`` applies, and says which. ``raw`` keeps every key (including
    ones we do not understand) so a rewrite never loses another engine's settings.
    """

    raw: dict[str, str] = field(default_factory=dict)

    # -- typed accessors ------------------------------------------------------------
    def get(self, key: str, default: str | None = None) -> str | None:
        return self.raw.get(key, default)

    def value(self, key: str) -> str | None:
        """The key's value, or the registry's default for it when absent."""
        if key in self.raw:
            return self.raw[key]
        return REGISTRY[key].default

    def _flag(self, key: str) -> bool:
        """A boolean key: ``true`` in any case is true; absent or empty takes the default."""
        value = self.raw.get(key)
        if value is None or value == "":
            value = REGISTRY[key].default or "false"
        return value.strip().lower() == "true"

    @property
    def name(self) -> str:
        return self.raw.get(TABLE_NAME, "")

    @property
    def database(self) -> str | None:
        return self.raw.get(DATABASE_NAME)

    @property
    def table_type(self) -> str:
        return (self.value(TABLE_TYPE) or "COPY_ON_WRITE").upper()

    @property
    def is_mor(self) -> bool:
        return self.table_type == "MERGE_ON_READ"

    @property
    def version(self) -> int:
        return int(self.raw.get(TABLE_VERSION, "0") or 0)

    @property
    def timeline_layout_version(self) -> int:
        """1 for table version 6 (``.hoodie/``), 2 for 8+ (``.hoodie/timeline/``)."""
        value = self.raw.get(TIMELINE_LAYOUT_VERSION)
        if value:
            return int(value)
        return 2 if self.version >= 8 else 1

    @property
    def timeline_path(self) -> str:
        """Timeline folder relative to ``.hoodie``: '' for layout 1."""
        if self.timeline_layout_version >= 2 and self.version >= 8:
            return self.raw.get(TIMELINE_PATH, "timeline")
        return ""

    @property
    def archive_folder(self) -> str:
        """Layout 1's archived timeline folder relative to ``.hoodie`` (``archived``)."""
        return self.raw.get(ARCHIVELOG_FOLDER) or "archived"

    @property
    def record_key_fields(self) -> tuple[str, ...]:
        """The record key fields, as written: no ``:`` suffix is removed.

        Only partition fields carry a type suffix; Hudi's ``getRecordKeyFields`` splits
        the value on ``,`` and nothing else, so a ``:`` would be part of a field name.
        """
        return _split_fields(self.raw.get(RECORD_KEY_FIELDS))

    @property
    def typed_partition_fields(self) -> tuple[tuple[str, str | None], ...]:
        """``(field, partition type)`` pairs; the type is ``None`` when not written.

        From table version 8 Hudi stores a custom key generator's partition fields with
        their type (``city:SIMPLE,ts:TIMESTAMP``); older tables store the bare names.
        """
        pairs = []
        for item in _split_fields(self.raw.get(PARTITION_FIELDS)):
            name, sep, kind = item.partition(":")
            pairs.append((name, kind.upper() if sep else None))
        return tuple(pairs)

    @property
    def partition_fields(self) -> tuple[str, ...]:
        """Partition columns, each with its ``:TYPE`` suffix removed.

        Hudi's ``getPartitionFieldWithoutKeyGenPartitionType`` keeps what comes before
        the first ``:`` (``BaseKeyGenerator.CUSTOM_KEY_GENERATOR_SPLIT_REGEX``) of every
        non-empty item, whatever the table version and key generator.
        """
        return tuple(name for name, _ in self.typed_partition_fields)

    @property
    def hive_style_partitioning(self) -> bool:
        return self._flag(HIVE_STYLE_PARTITIONING)

    @property
    def url_encode_partitioning(self) -> bool:
        return self._flag(URL_ENCODE_PARTITIONING)

    @property
    def drop_partition_columns(self) -> bool:
        return self._flag(DROP_PARTITION_COLUMNS)

    @property
    def key_generator_class(self) -> str | None:
        """The key generator's Java class, or ``None`` when the table names none.

        As Hudi's ``KeyGeneratorType.getKeyGeneratorClassName``: the class key wins when
        present (Hudi 1.x still writes it for a user-provided class); otherwise the
        version 8+ type key names a built-in generator. An unknown type makes the table
        unreadable, as it does for Hudi (``KeyGeneratorType.valueOf`` throws).
        """
        if KEYGEN_CLASS in self.raw:
            return self.raw[KEYGEN_CLASS].strip() or None
        kind = (self.raw.get(KEYGEN_TYPE) or "").strip().upper()
        if not kind or kind == "USER_PROVIDED":
            return None
        if kind not in KEYGEN_TYPE_CLASSES:
            raise CorruptDataError(f"{KEYGEN_TYPE}={kind} is not a Hudi key generator type")
        return KEYGEN_TYPE_CLASSES[kind]

    @property
    def formatted_partition_fields(self) -> frozenset[str]:
        """Partition fields whose path segment is a formatted value, not the column's own:
        every field of Hudi's ``TimestampBasedKeyGenerator``, and the ``:TIMESTAMP`` fields
        of its ``CustomKeyGenerator`` (all of them when the table does not say which). A
        filter on such a column cannot be decided from the partition path."""
        keygen = f"{self.raw.get(KEYGEN_CLASS, '')} {self.raw.get(KEYGEN_TYPE, '')}".upper()
        if "TIMESTAMP" in keygen:
            return frozenset(self.partition_fields)
        if "CUSTOM" in keygen:
            typed = self.typed_partition_fields
            if all(kind is None for _, kind in typed):
                return frozenset(self.partition_fields)
            return frozenset(name for name, kind in typed if kind != "SIMPLE")
        return frozenset()

    @property
    def timestamp_keygen(self) -> dict[str, str]:
        """The timestamp key generator's persisted settings (registry defaults filled in):
        ``type``, ``input_format``, ``output_format``, ``timezone``."""
        return {
            "type": self.value(TS_TYPE) or "",
            "input_format": self.value(TS_INPUT_FMT) or "",
            "output_format": self.value(TS_OUTPUT_FMT) or "",
            "timezone": self.value(TS_TIMEZONE) or "",
        }

    @property
    def ordering_fields(self) -> tuple[str, ...]:
        """The ordering fields: ``ordering.fields`` when present, else ``precombine.field``.

        Hudi 1.x declares ``hoodie.table.ordering.fields`` with the version 6/8 name
        ``hoodie.table.precombine.field`` as its alternative, and its config lookup
        returns the main key whenever the file has it - even empty - and the alternative
        only otherwise. So with both keys ``ordering.fields`` wins, and an empty
        ``ordering.fields`` means no ordering field. Hudi 0.15 and 1.0 know only
        ``precombine.field``; the tables they write never carry the new key (Hudi's 9 -> 8
        downgrade moves the value back), so the rule agrees with every Hudi that can read
        the table.
        """
        for key in (ORDERING_FIELDS, PRECOMBINE_FIELD):
            if key in self.raw:
                return _split_fields(self.raw[key])
        return ()

    @property
    def precombine_field(self) -> str | None:
        """The first ordering field (the one a single-field merge compares)."""
        fields = self.ordering_fields
        return fields[0] if fields else None

    @property
    def legacy_log_block_format(self) -> str:
        """``parquet`` or ``avro``: the data block type versions of this project before
        0.2 wrote into ``hoodie.table.log.file.format`` (see :func:`format_problems`);
        ``parquet`` for any other value."""
        value = (self.raw.get(LOG_FILE_FORMAT) or "PARQUET").strip().lower()
        return value if value in ("parquet", "avro") else "parquet"

    @property
    def index_settings(self) -> tuple[str, str, tuple[str, ...]]:
        """This project's index keys as written: type (lower case; ``bloom`` when
        absent), bucket count text ('' when absent) and hash fields."""
        kind = (self.value(INDEX_TYPE) or "").strip().lower()
        return kind, (self.raw.get(BUCKET_NUM_BUCKETS) or "").strip(), _split_fields(
            self.raw.get(BUCKET_HASH_FIELD)
        )

    @property
    def merge_mode(self) -> str:
        """``EVENT_TIME_ORDERING`` or ``COMMIT_TIME_ORDERING`` (the only two we merge by).

        An explicit ``hoodie.record.merge.mode`` wins; otherwise (v6 tables) the payload
        class decides as in hudi-rs: ``OverwriteWithLatestAvroPayload`` means the latest
        write wins, whatever the precombine field says; any other payload with a
        precombine field orders by it; no precombine field means commit time.
        """
        explicit = (self.raw.get(RECORD_MERGE_MODE) or "").upper()
        if explicit in ("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"):
            return explicit
        if (self.raw.get(PAYLOAD_CLASS) or "").endswith(".OverwriteWithLatestAvroPayload"):
            return "COMMIT_TIME_ORDERING"
        return "EVENT_TIME_ORDERING" if self.precombine_field else "COMMIT_TIME_ORDERING"

    @property
    def unsupported_merge(self) -> str | None:
        """Why this table's merge rule is not one we honour (``None``: it is).

        We merge by event time or commit time, as the standard payloads (``Default``,
        ``OverwriteWithLatest``, ``EventTime``) and Hudi 1.x's two built-in modes define
        them. A custom merge mode or merger, another payload class (partial updates,
        Debezium's, DMS's) or a partial-update mode would be misread, so the table is
        refused naming the setting instead. So is more than one ordering field (Hudi 1.x
        compares them in turn; a merge by the first alone keeps the wrong version, and a
        compaction would make that permanent), as hudi-rs refuses it.
        """
        if len(self.ordering_fields) > 1:
            return f"{ORDERING_FIELDS}={','.join(self.ordering_fields)} (more than one ordering field)"
        mode = (self.raw.get(RECORD_MERGE_MODE) or "").strip().upper()
        if mode and mode not in ("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"):
            return f"{RECORD_MERGE_MODE}={mode}"
        payload = (self.raw.get(PAYLOAD_CLASS) or "").strip()
        if payload and payload not in STANDARD_PAYLOADS:
            return f"{PAYLOAD_CLASS}={payload}"
        strategy = (self.raw.get(MERGE_STRATEGY_ID) or self.raw.get(MERGER_STRATEGY) or "").strip()
        if strategy and strategy not in (DEFAULT_MERGER_STRATEGY, COMMIT_TIME_MERGER_STRATEGY):
            return f"{MERGE_STRATEGY_ID}={strategy}"
        partial = (self.raw.get(PARTIAL_UPDATE_MODE) or "").strip().upper()
        if partial and partial != "NONE":
            return f"{PARTIAL_UPDATE_MODE}={partial}"
        return None

    @property
    def populate_meta_fields(self) -> bool:
        return self._flag(POPULATE_META_FIELDS)

    @property
    def base_file_extension(self) -> str:
        return "." + (self.value(BASE_FILE_FORMAT) or "PARQUET").lower()

    @property
    def create_schema(self) -> str | None:
        return self.raw.get(CREATE_SCHEMA)

    @property
    def checksum(self) -> int | None:
        value = self.raw.get(CHECKSUM)
        return int(value) if value else None

    def expected_checksum(self) -> int:
        return table_checksum(self.name, self.database)

    def checksum_valid(self) -> bool:
        return self.checksum is not None and self.checksum == self.expected_checksum()

    # -- (de)serialisation ----------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> TableProperties:
        return cls(parse_java_properties(text))

    def to_text(self, comment: str | None = None, now: _dt.datetime | None = None) -> str:
        """Serialise with a fresh checksum (Hudi rejects a stale one)."""
        now = now or _dt.datetime.now(_dt.timezone.utc)
        raw = dict(self.raw)
        if TABLE_NAME in raw:
            raw[CHECKSUM] = str(self.expected_checksum())
        if comment is None:
            comment = "Properties saved on " + now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return format_java_properties(raw, comment, now)

    def with_updates(self, updates: Mapping[str, str]) -> TableProperties:
        """A copy with the given raw keys replaced (the original stays untouched)."""
        raw = dict(self.raw)
        raw.update(updates)
        return TableProperties(raw)


def version_keys(version: int, ordering_field: str | None, keygen_class: str | None,
                 *, event_time: bool | None = None) -> dict[str, str]:
    """The keys Hudi 1.x's writer adds at table version 8 or 9 (audited against tables
    Hudi 1.0.2 and 1.2.0 created: ``tests/hudi_jvm/test_table_versions.py``).

    Both versions: the timeline's layout-2 folders (``archivelog.folder`` names the
    history too), the version the table began at, the merge mode spelled out (event time
    with an ordering field, else commit time) and the key generator by *type* - Hudi 1.x
    writes the class only for a user-provided one. Version 8 keeps 0.x's
    ``precombine.field`` and payload class beside the mode, with the merger strategy id;
    version 9 names the ordering fields ``ordering.fields`` and drops the payload class
    (only a custom payload is kept) and the strategy id for ``hoodie.table.format``.
    """
    event_time = bool(ordering_field) if event_time is None else event_time
    raw = {
        TIMELINE_PATH: "timeline",
        TIMELINE_HISTORY_PATH: "history",
        ARCHIVELOG_FOLDER: "history",
        INITIAL_VERSION: str(version),
        RECORD_MERGE_MODE: "EVENT_TIME_ORDERING" if event_time else "COMMIT_TIME_ORDERING",
    }
    if version == 8:  # version 9 derives the strategy from the mode
        raw[MERGE_STRATEGY_ID] = DEFAULT_MERGER_STRATEGY if event_time else COMMIT_TIME_MERGER_STRATEGY
    if keygen_class:
        types = {cls: kind for kind, cls in KEYGEN_TYPE_CLASSES.items()}
        raw[KEYGEN_TYPE] = types.get(keygen_class, "USER_PROVIDED")
        if raw[KEYGEN_TYPE] == "USER_PROVIDED":
            raw[KEYGEN_CLASS] = keygen_class
    if version == 8:
        if ordering_field:
            raw[PRECOMBINE_FIELD] = ordering_field
        raw[PAYLOAD_CLASS] = DEFAULT_PAYLOAD if event_time else OVERWRITE_PAYLOAD
    else:
        if ordering_field:
            raw[ORDERING_FIELDS] = ordering_field
        raw[TABLE_FORMAT] = "native"
    raw[TABLE_VERSION] = str(version)
    raw[TIMELINE_LAYOUT_VERSION] = "2"
    return raw


def upgraded_properties(props: TableProperties, version: int) -> TableProperties:
    """``props`` of a version-6 table as Hudi's upgrade handlers leave them at ``version``
    (8 or 9): the keys of :func:`version_keys`, the merge mode the table had, the version
    it began at kept as ``initial.version``; version 6's merger-strategy key dropped, and
    at 9 the ordering field moved to ``ordering.fields`` and a standard payload class or
    key generator class dropped (the merge mode and key generator type say the same)."""
    kg_class = props.key_generator_class
    raw = dict(props.raw)
    raw.pop(MERGER_STRATEGY, None)
    if version >= 9:
        raw.pop(PRECOMBINE_FIELD, None)
        if raw.get(PAYLOAD_CLASS) in (DEFAULT_PAYLOAD, OVERWRITE_PAYLOAD):
            raw.pop(PAYLOAD_CLASS)
    raw.update(version_keys(version, props.precombine_field, kg_class,
                            event_time=props.merge_mode == "EVENT_TIME_ORDERING"))
    if raw.get(KEYGEN_TYPE, "USER_PROVIDED") != "USER_PROVIDED":
        raw.pop(KEYGEN_CLASS, None)
    raw[INITIAL_VERSION] = props.raw.get(INITIAL_VERSION) or str(props.version)
    out = TableProperties(raw)
    out.raw[CHECKSUM] = str(out.expected_checksum())
    return out


def properties_path(base_path: str) -> str:
    return posixpath.join(base_path, METAFOLDER, PROPERTIES_FILE)


def load_properties(fs: FileSystem, base_path: str, check_version: bool = True) -> TableProperties:
    """Read and validate a table's properties.

    Raises :class:`NotAHudiTableError` when the file is absent, :class:`CorruptDataError`
    when the checksum does not match (as Hudi does), and
    :class:`UnsupportedTableVersionError` for versions we cannot read.
    """
    path = properties_path(base_path)
    if not fs.exists(path):
        raise NotAHudiTableError(f"not a Hudi table (no {METAFOLDER}/{PROPERTIES_FILE})", base_path)
    try:
        props = TableProperties.parse(fs.read_text(path))
    except UnicodeDecodeError as e:
        raise CorruptDataError(f"hoodie.properties is not text ({e})", path) from e
    if TABLE_NAME not in props.raw or TABLE_VERSION not in props.raw:
        raise CorruptDataError("hoodie.properties lacks table name or version", path)
    if props.checksum is not None and not props.checksum_valid():
        raise CorruptDataError(
            f"hoodie.table.checksum {props.checksum} does not match {props.expected_checksum()}",
            path,
        )
    if check_version and props.version not in READABLE_VERSIONS:
        raise UnsupportedTableVersionError(
            f"table version {props.version} is not supported (readable: "
            f"{sorted(READABLE_VERSIONS)})",
            path,
        )
    return props


def write_properties(fs: FileSystem, base_path: str, props: TableProperties) -> None:
    """Write ``hoodie.properties`` atomically, with a correct checksum.

    A table Apache Hudi wrote through Hadoop's local file system also has a
    ``.hoodie.properties.crc`` beside it, which Hadoop verifies on every read: left
    stale, Hudi fails with "Could not load Hoodie properties". It is removed first (no
    .crc means no verification), so a crash in between leaves a readable table.
    """
    path = properties_path(base_path)
    crc = posixpath.join(posixpath.dirname(path), "." + PROPERTIES_FILE + ".crc")
    if fs.exists(crc):
        fs.delete_file(crc)
    fs.write_atomic(path, props.to_text().encode("latin-1", "strict"))


def format_problems(props: TableProperties) -> list[str]:
    """What in ``props`` makes Apache Hudi read the table wrongly (empty: nothing).

    Why this exists: versions of this project before the Hudi JVM tier wrote
    ``hoodie.table.log.file.format=PARQUET`` (meaning the data block type). Hudi reads
    that key as the log *file* format (``HoodieTableConfig.getLogFileFormat``) and its
    file-system view recognises log files by that format's extension, so with
    ``PARQUET`` no ``.log.N`` file is seen: every log record is silently dropped, and a
    Hudi writer then writes over the slices. Hudi 0.15 itself never writes the key
    (the default ``HOODIE_LOG`` applies), so neither do we.
    """
    problems = []
    value = props.raw.get(LOG_FILE_FORMAT)
    if value is not None and value.strip().upper() != HOODIE_LOG:
        problems.append(
            f"{LOG_FILE_FORMAT}={value}: Apache Hudi takes this for the log file format and "
            "skips every log file (log records invisible to Hudi's readers and writers)"
        )
    return problems


def repaired_properties(props: TableProperties) -> TableProperties:
    """``props`` with every :func:`format_problems` item fixed (other keys untouched)."""
    raw = dict(props.raw)
    value = raw.get(LOG_FILE_FORMAT)
    if value is not None and value.strip().upper() != HOODIE_LOG:
        del raw[LOG_FILE_FORMAT]
    return TableProperties(raw)


def new_table_properties(
    name: str,
    table_type: str = "MERGE_ON_READ",
    record_key_fields: tuple[str, ...] | list[str] = (),
    partition_fields: tuple[str, ...] | list[str] = (),
    precombine_field: str | None = None,
    database: str | None = "default",
    hive_style_partitioning: bool = False,
    keygen_class: str | None = None,
    create_schema: str | None = None,
    extra: Mapping[str, str] | None = None,
    version: int = WRITE_VERSION,
    event_time: bool | None = None,
) -> TableProperties:
    """Properties for a new table of ``version``: the keys Hudi's Spark writer of that
    version writes (0.15 for 6, 1.0 for 8, 1.2 for 9; see :func:`version_keys`).

    Audited against a MOR table Hudi 0.15.0 created (``tests/hudi_jvm``): same keys and
    values, with these differences, each accepted by Hudi's ``HoodieTableConfig``:
    ``hoodie.table.timeline.timezone`` is ``UTC`` (Hudi writes its default ``LOCAL``; our
    instant times are UTC, and ``HoodieInstantTimeGenerator`` reads the key to parse
    them); ``hoodie.database.name`` defaults to ``default`` (Hudi leaves it empty unless
    the table is made through a catalog; only the checksum depends on it); the payload
    class follows the ordering field (see below). ``hoodie.table.log.file.format`` is
    never written: see :func:`format_problems`. ``event_time``: at version 8 or later, the
    merge mode (default: event time with an ordering field).
    """
    raw: dict[str, str] = {
        TABLE_TYPE: table_type,
        TABLE_VERSION: str(version),
        TIMELINE_LAYOUT_VERSION: "1" if version < 8 else "2",
        TABLE_NAME: name,
        ARCHIVELOG_FOLDER: "archived",
        CDC_ENABLED: "false",
        TIMELINE_TIMEZONE: "UTC",
        HIVE_STYLE_PARTITIONING: "true" if hive_style_partitioning else "false",
        URL_ENCODE_PARTITIONING: "false",
        DROP_PARTITION_COLUMNS: "false",
        PARTITION_METAFILE_BASE_FORMAT: "false",
        POPULATE_META_FIELDS: "true",
        BASE_FILE_FORMAT: "PARQUET",
    }
    if database:
        raw[DATABASE_NAME] = database
    if record_key_fields:
        raw[RECORD_KEY_FIELDS] = ",".join(record_key_fields)
    if partition_fields:
        raw[PARTITION_FIELDS] = ",".join(partition_fields)
    if create_schema:
        raw[CREATE_SCHEMA] = create_schema
    if version < 8:
        if precombine_field:
            raw[PRECOMBINE_FIELD] = precombine_field
        if keygen_class:
            raw[KEYGEN_CLASS] = keygen_class
        if table_type == "MERGE_ON_READ":
            # With an ordering field the table merges by event time, and says so with the payload
            # Hudi uses for that (readers such as hudi-rs pick the merge rule from it); without
            # one, the latest write wins.
            raw.setdefault(PAYLOAD_CLASS, DEFAULT_PAYLOAD if precombine_field else OVERWRITE_PAYLOAD)
            raw.setdefault(MERGER_STRATEGY, DEFAULT_MERGER_STRATEGY)
    else:
        raw.update(version_keys(version, precombine_field, keygen_class, event_time=event_time))
    raw.update(extra or {})
    props = TableProperties(raw)
    props.raw[CHECKSUM] = str(props.expected_checksum())
    return props
