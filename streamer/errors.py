"""One exception root for everything mor-streamer raises on purpose.

Callers catch :class:`StreamerError` to handle any of our failures, or a subclass
to handle one kind. Every message names the path, key or field at fault, because
an error a user cannot locate is an error they cannot fix.
"""

from __future__ import annotations


class StreamerError(Exception):
    """Root of all mor-streamer errors."""


def one_line(e: BaseException) -> str:
    """``e``'s message on one line: a library's message spanning lines (Arrow's Parquet
    errors: ``Invalid data`` then ``Deserializing page header failed.``) inside ours would
    break the one line a refusal promises."""
    return " ".join(str(e).split()) or type(e).__name__


def first_line(e: BaseException) -> str:
    """``e``'s first line: where the rest is a library's detail (Spark's analysis errors
    append the query plan, Arrow's Parquet errors the page that failed)."""
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


class ConfigError(StreamerError):
    """A pipeline/table configuration is invalid (names the file and field)."""


class EnvironmentSetupError(StreamerError):
    """A required external part (JVM jars, Java, broker) is missing or misconfigured."""


class TableError(StreamerError):
    """Base for problems with a table on storage."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message if path is None or path in message else f"{message}: {path}")
        self.path = path


class NotAHudiTableError(TableError):
    """The path has no ``.hoodie/hoodie.properties``."""


class UnsupportedTableVersionError(TableError):
    """The table's version (or layout) is one we cannot read or write."""


class UnsupportedMergeError(TableError):
    """The table merges records by a rule we do not implement (a custom merger, a
    partial-update payload): refused by name rather than misread."""


class MissingFileError(TableError):
    """A file referenced by a completed instant is missing."""


class CorruptDataError(TableError):
    """Bytes on storage do not follow the format (bad magic, impossible length...)."""


class StorageError(TableError, OSError):
    """Storage refused a write (full disk, no permission, quota): names the file.

    Also an :class:`OSError`, so code that tolerates a failed write (a missed lock
    heartbeat) keeps tolerating it."""


class SchemaError(StreamerError):
    """Incompatible or invalid schema (names the field)."""


class CommitError(StreamerError):
    """A commit could not be completed."""


class CommitConflictError(CommitError):
    """Another writer committed or holds the lock first. Retryable."""

    retryable = True


class PositionConflictError(CommitConflictError):
    """Another run of the same pipeline committed a newer position than the one this run
    read from: the pipeline runs twice. Trying the commit again cannot help (the table's
    position stays newer); a new run resumes from it."""

    retryable = False


class SourceError(StreamerError):
    """A source cannot be read or its stored position is unusable."""


class KafkaBrokerError(StreamerError):
    """The Kafka broker could not be started, reached or stopped in time."""


class QueryError(StreamerError):
    """An invalid query (unknown type, instant not on the timeline...)."""


class VersionsCleanedError(QueryError):
    """A time travel to before what a clean retains: the file versions it needs are gone, or
    may be. Unlike a time travel into a pending write, asking again later does not help."""


class ServiceError(StreamerError):
    """A table service could not schedule, run or roll back a plan."""


class LeaseHeldError(StreamerError):
    """Another live process runs this pipeline."""
