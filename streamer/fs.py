"""The one filesystem seam: every byte we read or write goes through here.

It wraps :mod:`pyarrow.fs` so the same code runs on a local folder, S3 or HDFS.
Paths handed around the code base are plain strings *inside* the filesystem
(no scheme); :func:`resolve` splits a user's URI into the two.

Why a seam instead of ``open()``: object stores cannot rename atomically or append,
and tests want to inject faults. Keeping the calls in one place means those
differences are handled once.
"""

from __future__ import annotations

import contextlib
import operator
import os
import pickle
import posixpath
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, SupportsIndex

import pyarrow as pa
import pyarrow.fs as pafs

from streamer.errors import MissingFileError, StorageError
from streamer.fs_s3 import Conditional, S3Settings, custom_endpoint_environ

_S3_READ_ATTEMPTS = 4


@dataclass(frozen=True, slots=True)
class FileStatus:
    """One listed file or folder (a large table's listing holds many: slotted)."""

    path: str
    size: int
    is_dir: bool
    mtime_ns: int | None

    @classmethod
    def of(cls, info: pafs.FileInfo, path: str | None = None) -> FileStatus:
        """``info`` as pyarrow lists it, named ``path`` (default: pyarrow's name for it)."""
        return cls(path or info.path, info.size or 0, info.type == pafs.FileType.Directory, info.mtime_ns)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


@dataclass(frozen=True)
class Tagged:
    """A file's bytes and the store's version of them (an S3 ETag), for compare-and-swap.

    ``tag`` is None where the store offers no conditional replace (local disk, HDFS)."""

    data: bytes
    tag: str | None = None


#: Start of the name of :meth:`FileSystem.write_atomic`'s temp files.
TEMP_PREFIX = "_mor_tmp."


def temp_name(path: str) -> str:
    """Where :meth:`FileSystem.write_atomic` stages ``path``: ``_mor_tmp.<name>.<hex>.tmp``.

    Why this shape: a killed writer (a Spark task attempt, kill -9) can leave its temp file
    behind, and no reader may take it for table data. The earlier ``.<name>.<hex>.tmp``
    of a log file still matched Apache Hudi's log-file pattern (``^\\.(.+)_(.*)\\.(log|archive)
    \\.(\\d+)...``, found, not matched whole), and hudi-rs read such a leftover as the log of
    another file group: every key of the block appeared twice (the Spark-cluster kill test).
    A leading ``_`` is outside that pattern, ``.tmp`` is no base-file extension, and Spark's
    and Hadoop's listings skip ``_``-prefixed names. The target's name stays inside, so a
    rollback finds the leftovers of the files it deletes (``rollback._temp_leftovers``).
    """
    parent, name = posixpath.split(path)
    return posixpath.join(parent, f"{TEMP_PREFIX}{name}.{uuid.uuid4().hex}.tmp")


class FileSystem:
    """A thin, typed wrapper over a :class:`pyarrow.fs.FileSystem`.

    ``conditional``: S3's conditional PUTs (:class:`streamer.fs_s3.Conditional`), which
    pyarrow cannot send; set by :func:`resolve` for ``s3://`` locations.
    """

    def __init__(self, fs: pafs.FileSystem | None = None, conditional: Conditional | None = None) -> None:
        self.arrow: pafs.FileSystem = fs if fs is not None else pafs.LocalFileSystem()
        self.conditional = conditional

    # -- construction -------------------------------------------------------------
    def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[Any, ...]:
        """Shipped to another process (a Spark executor's write context) with a custom S3
        endpoint: that process's AWS SDK must get the checksum settings before pyarrow's
        S3 filesystem is rebuilt there (s3proxy and older MinIO refuse its uploads
        otherwise), so the filesystem travels as bytes unpickled after they are set."""
        if type(self) is FileSystem and self.conditional is not None and self.conditional.settings.endpoint:
            return (_s3_from_pickle, (self.conditional, pickle.dumps(self.arrow, operator.index(protocol))))
        return super().__reduce_ex__(protocol)

    @property
    def is_local(self) -> bool:
        return isinstance(self.arrow, pafs.LocalFileSystem)

    @property
    def supports_atomic_rename(self) -> bool:
        """Local and HDFS renames are atomic; object-store "renames" are copies."""
        return self.is_local or self.arrow.type_name == "hdfs"

    # -- reading ------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        return self.arrow.get_file_info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self.arrow.get_file_info(path).type == pafs.FileType.Directory

    def status(self, path: str) -> FileStatus:
        info = self.arrow.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise MissingFileError("file not found", path)
        return FileStatus.of(info, path)

    def list_dir(self, path: str) -> list[FileStatus]:
        """Direct children of ``path`` (empty if it does not exist)."""
        try:
            infos = self.arrow.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        except NotADirectoryError:
            return []
        return [FileStatus.of(i) for i in infos]

    def walk_files(self, path: str) -> Iterator[FileStatus]:
        infos = self.arrow.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
        for i in infos:
            if i.type == pafs.FileType.File:
                yield FileStatus.of(i)

    def read_bytes(self, path: str) -> bytes:
        """The whole file. On S3 a failed read is retried (bounded): an object replaced or
        deleted while it streams (a lock released, a heartbeat) can cut a response short
        on S3-compatible servers backed by a filesystem; the retry then sees the new
        version or its absence."""
        attempts = _S3_READ_ATTEMPTS if self.conditional is not None else 1
        for attempt in range(attempts):
            try:
                with self.arrow.open_input_stream(path) as f:
                    return f.read()
            except FileNotFoundError as e:
                raise MissingFileError("file not found", path) from e
            except OSError:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def open_input_file(self, path: str) -> pa.NativeFile:
        """Random-access handle (for Parquet footers and log block seeks)."""
        try:
            return self.arrow.open_input_file(path)
        except FileNotFoundError as e:
            raise MissingFileError("file not found", path) from e

    # -- writing ------------------------------------------------------------------
    def mkdirs(self, path: str) -> None:
        """Create a folder. On S3 nothing: folders are key prefixes, and the empty marker
        objects pyarrow would PUT cost requests on every write and show up as objects
        (not prefixes) in some stores' listings (s3proxy's transient backend), hiding
        partitions from readers such as hudi-rs."""
        if self.conditional is not None:
            return
        self.arrow.create_dir(path, recursive=True)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole file (not atomic on its own; see :meth:`write_atomic`)."""
        parent = posixpath.dirname(path)
        if parent:
            self.mkdirs(parent)
        with self.arrow.open_output_stream(path) as f:
            f.write(data)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Make ``path`` appear with all of ``data`` or not at all.

        Local/HDFS: write a temp file (:func:`temp_name`), fsync, rename. Object stores:
        one PUT of the whole body. On S3 it is sent whole (boto3), not through pyarrow's
        output stream: an exception inside that stream's ``with`` - Ctrl-C, which a
        service takes mid-round - closes it, and closing uploads what was written so far,
        an empty completed instant at worst (seen in the services campaign on s3proxy).
        """
        if not self.supports_atomic_rename:
            if self.conditional is not None:
                self.conditional.put(path, bytes(data))
                return
            self.write_bytes(path, data)
            return
        parent = posixpath.dirname(path)
        tmp = temp_name(path)
        try:
            self.write_bytes(tmp, data)
            if self.is_local:
                _fsync_local(tmp)
            self.arrow.move(tmp, path)
        except OSError as e:  # a full disk: no half-written temp file left behind
            with contextlib.suppress(OSError):
                self.arrow.delete_file(tmp)
            reason = (getattr(e, "strerror", None) or str(e)).strip().splitlines()[-1]
            raise StorageError(f"could not write ({reason})", path) from e
        if self.is_local:
            _fsync_local(parent)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Create ``path`` holding ``data`` only if it does not exist yet; ``True`` if we did.

        This is what locks are built on, so exactly one of many concurrent callers may win.
        Local: the data goes to a private temp file (fsynced) that is hard-linked to
        ``path`` - atomic, fails if ``path`` exists, and the file is never seen empty;
        where hard links are unsupported, ``os.open(O_CREAT | O_EXCL)`` then write (a
        reader may briefly see it empty: lock readers treat a fresh unreadable lock as held).
        S3: a conditional PUT (``If-None-Match: *``) confirmed by a read-back, after
        checking once per bucket that the store honours it (else :class:`StorageError`,
        see :mod:`streamer.fs_s3`).
        Other stores: pyarrow has no conditional create (HDFS needs
        ``create(overwrite=false)``), so this is *best effort*: check, write, read back.
        Two callers racing within one round trip may both see ``True``; run one writer
        per table there, or put an external lock in front.
        """
        if self.conditional is not None and self.conditional.require(path):
            return self.conditional.create(path, data)
        parent = posixpath.dirname(path)
        if parent:
            self.mkdirs(parent)
        if self.is_local:
            # Write a private temp file, then hard-link it into place: the link is atomic
            # and fails if the name exists, so nobody ever sees the file half-written
            # (a creator killed mid-way leaves no empty lock behind).
            tmp = posixpath.join(parent, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.excl")
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            except OSError:  # no hard links here: exclusive create, then write
                return self._create_exclusive_open(path, data)
            finally:
                os.unlink(tmp)
        if self.exists(path):
            return False
        self.write_bytes(path, data)
        try:
            return self.read_bytes(path) == data
        except MissingFileError:
            return False

    def read_tagged(self, path: str) -> Tagged | None:
        """The file's bytes and version tag (``None``: absent), for :meth:`replace_if`."""
        if self.conditional is not None and self.conditional.honoured(path):
            return self._tagged_get(path)
        try:
            return Tagged(self.read_bytes(path))
        except MissingFileError:
            return None

    def _tagged_get(self, path: str) -> Tagged | None:
        assert self.conditional is not None
        got = self.conditional.get(path)
        return None if got is None else Tagged(*got)

    def replace_if(self, path: str, data: bytes, tag: str | None) -> bool:
        """Replace ``path`` only if it still is the version ``tag`` names; ``True`` if we did.

        S3: ``If-Match: <etag>``, so a lock holder that stalled past its expiry cannot
        overwrite its successor's lock. Without a tag (local disk, HDFS): an atomic write,
        the caller having just re-read the file (a race of one round trip remains).
        """
        if tag is not None and self.conditional is not None:
            return self.conditional.put(path, data, if_match=tag) is not None
        self.write_atomic(path, data)
        return True

    @staticmethod
    def _create_exclusive_open(path: str, data: bytes) -> bool:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def delete_file(self, path: str, missing_ok: bool = True) -> None:
        """Delete one file. On S3 one DELETE request: pyarrow's would also PUT an empty
        marker for the parent "folder" so it stays visible, an object that some stores
        then list instead of the prefix (see :meth:`mkdirs`)."""
        if self.conditional is not None:
            if not missing_ok and not self.exists(path):
                raise FileNotFoundError(path)
            self.conditional.delete(path)
            return
        try:
            self.arrow.delete_file(path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def delete_dir(self, path: str) -> None:
        """Delete a directory tree if present; tolerates another process deleting it (or
        some of its files) at the same moment, e.g. two cleaners of one marker folder."""
        if self.is_local:
            # rmtree walks once and skips what a concurrent deleter already removed; a
            # retry loop over arrow's delete_dir could lose every round to the other one
            shutil.rmtree(path, onerror=_ignore_vanished)
            return
        if self.conditional is not None:
            self._delete_objects(path)
            return
        attempts = 20
        for attempt in range(attempts):
            if not self.exists(path):
                return
            try:
                self.arrow.delete_dir(path)
                return
            except FileNotFoundError:
                # a child (or the folder) vanished under us: look again
                if attempt == attempts - 1 and self.exists(path):
                    raise

    def _delete_objects(self, path: str) -> None:
        """S3: each object, then the folder markers deepest first.

        One request per object, not pyarrow's bulk DeleteObjects of files and markers
        together: S3-compatible servers on a filesystem (s3proxy) fail a bulk delete that
        removes a folder marker before its children, and pyarrow's delete_dir refuses a
        folder they list but cannot HEAD. Objects another deleter removed meanwhile are
        skipped (an S3 DELETE of an absent key succeeds)."""
        infos = self.arrow.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
        for i in infos:
            if i.type == pafs.FileType.File:
                self.delete_file(i.path)
        folders = [i.path for i in infos if i.type == pafs.FileType.Directory] + [path]
        assert self.conditional is not None
        for folder in sorted(folders, key=lambda f: f.count("/"), reverse=True):
            self.conditional.delete(folder.rstrip("/") + "/")  # the marker; absent is fine

    def rename(self, src: str, dst: str) -> None:
        self.arrow.move(src, dst)


def _s3_from_pickle(conditional: Conditional, arrow: bytes) -> FileSystem:
    custom_endpoint_environ()
    return FileSystem(pickle.loads(arrow), conditional)


#: How pyarrow's filesystems word a request the store failed to serve (network, throttling,
#: an I/O error), as opposed to bytes that arrived and do not decode.
_ACCESS_FAILURE = ("AWS Error", "curlCode", "When reading information for key", "When getting information for key",
                   "When reading from", "When opening", "When completing", "[errno ", "Input/output error",
                   "Connection reset", "timed out")


def read_failure(e: BaseException, path: str, what: str) -> StorageError | None:
    """``e`` as a :class:`StorageError` naming ``path`` if the store failed to serve the read,
    else None (the caller reports damage).

    Why it matters: a read that the store could not serve (an endpoint restarting, a 503
    storm, a disk's EIO) is not damage. Reported as a corrupt file it would send an
    operator to ``repair --drop-damaged`` for a file that is intact; as a storage error
    the run fails and the next one reads the file again.
    """
    if isinstance(e, StorageError):
        return e
    message = str(e)
    if isinstance(e, OSError) and (e.errno is not None or any(m in message for m in _ACCESS_FAILURE)):
        return StorageError(f"{what}: the store failed to serve it ({message.strip().splitlines()[0]})", path)
    return None


def _ignore_vanished(func: Callable[..., object], path: str,
                     exc_info: tuple[type[BaseException], BaseException, TracebackType]) -> None:
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


def _fsync_local(path: str) -> None:
    flags = os.O_RDONLY
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: Hadoop's S3 connectors' schemes; pyarrow knows only ``s3``.
_S3_SCHEMES = ("s3", "s3a", "s3n")


def resolve(uri: str, s3: S3Settings | None = None) -> tuple[FileSystem, str]:
    """Split a user's path or URI into (filesystem, path inside it).

    Accepted, as Hadoop and Spark write them: plain paths (made absolute, so relative
    lake folders work from any cwd), ``file:/abs``, ``file:///abs`` and
    ``file://localhost/abs`` (all the same local path - Spark hands a table's
    ``LOCATION`` over as such a URI), ``s3://``/``s3a://``/``s3n://bucket/key`` (pyarrow's
    S3 filesystem; the region comes from ``?region=``, ``AWS_REGION`` or
    ``AWS_DEFAULT_REGION`` - only without any of them is the bucket asked over the
    network; an S3-compatible endpoint from ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``
    or ``?endpoint_override=host:port&scheme=http``, see docs/object-storage.md), and
    anything else pyarrow resolves (``hdfs://``, ``gs://``...).

    ``s3``: a pipeline's ``storage.s3`` settings (endpoint, region, credentials), used for
    ``s3://`` locations field by field over the AWS environment; None = the environment
    alone. Passed explicitly by whoever resolves a pipeline's paths, never kept globally,
    so two pipelines of one run may each use their own store.
    """
    scheme, rest = _split_scheme(uri)
    if scheme is None:
        return FileSystem(pafs.LocalFileSystem()), _local(uri)
    if scheme == "file":
        return FileSystem(pafs.LocalFileSystem()), _local(_file_uri_path(uri, rest))
    if scheme in _S3_SCHEMES:
        return _resolve_s3(rest, s3)
    fs, path = pafs.FileSystem.from_uri(uri)
    return FileSystem(fs), path.rstrip("/")


def location_key(uri: str) -> str:
    """One spelling per location (``file:/a``, ``/a`` and ``a`` from ``/`` are equal), so
    config checks can tell that two paths name one table. Pure: no filesystem is built."""
    scheme, rest = _split_scheme(uri)
    if scheme is None:
        return _local(uri)
    if scheme == "file":
        return _local(_file_uri_path(uri, rest))
    if scheme in _S3_SCHEMES:
        scheme = "s3"
    return f"{scheme}://{rest.split('?', 1)[0].lstrip('/').rstrip('/')}"


def _split_scheme(uri: str) -> tuple[str | None, str]:
    """(scheme, the rest) for ``file:`` and ``scheme://`` URIs; (None, uri) for paths.

    A plain path may contain a colon (``data:2024``), so only ``file:`` is taken as a
    scheme without ``//``."""
    head, sep, rest = uri.partition(":")
    scheme = head.lower()
    if not sep or not head or not (head[0].isalpha() and all(c.isalnum() or c in "+.-" for c in head)):
        return None, uri
    if scheme == "file" or (rest.startswith("//") and len(head) > 1):  # len 1: a Windows drive
        return scheme, rest
    return None, uri


def _file_uri_path(uri: str, rest: str) -> str:
    """The local path of a ``file:`` URI (percent-escapes decoded, as URIs require)."""
    from urllib.parse import unquote

    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host not in ("", "localhost"):
            raise StorageError(f"a file: URI must name a local path (file:/path or file:///path), "
                               f"not host {host!r}", uri)
        rest = slash + path
    return unquote(rest) or "/"


def _local(path: str) -> str:
    return os.path.abspath(path).replace(os.sep, "/")


def _resolve_s3(rest: str, base: S3Settings | None) -> tuple[FileSystem, str]:
    location, _, query = rest.partition("?")
    location = location.lstrip("/").rstrip("/")
    settings = (base or S3Settings()).resolved(query)
    conditional = Conditional(settings)
    if not settings.endpoint and not settings.region:
        if not settings.explicit:
            # no credentials of ours to hand over, the region to be looked up: pyarrow's way
            fs, path = pafs.FileSystem.from_uri(f"s3://{location}" + (f"?{query}" if query else ""))
            return FileSystem(fs, conditional), path.rstrip("/")
        region = settings._profile_region()  # a profile may name the region
        if region is None:
            bucket = location.partition("/")[0]
            try:
                region = pafs.resolve_s3_region(bucket)
            except OSError as e:
                raise StorageError(f"{settings.source}: no region set and the bucket's region could "
                                   f"not be looked up ({e}); set region", f"s3://{location}") from None
        settings = replace(settings, region=region)
        conditional = Conditional(settings)
    elif not settings.endpoint and query and not settings.explicit:
        # other options in the URI (pyarrow's ?anonymous=...): pyarrow's way
        fs, path = pafs.FileSystem.from_uri(f"s3://{location}?{query}")
        return FileSystem(fs, conditional), path.rstrip("/")
    return FileSystem(settings.arrow(), conditional), location
