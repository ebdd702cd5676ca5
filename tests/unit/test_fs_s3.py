"""The filesystem seam on a real S3-compatible server (s3proxy, started once per session).

What differs from a local disk is checked where it differs: atomic files are one PUT,
exclusive create is a conditional PUT (``If-None-Match: *``), a lock's refresh is
``If-Match`` on the ETag it read, and folders are only key prefixes (deleting one must
not depend on the order a server deletes markers in).

Each runs on every S3 store (``s3_store``: s3proxy, and MinIO where Docker answers); the
filesystem operations also run twice per store, once configured by the AWS variables and
once by explicit settings (what a pipeline's ``storage.s3`` YAML gives) with those
variables removed, so nothing of the YAML route silently falls back to the environment.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from unittest import mock

import pytest

from streamer.errors import MissingFileError, StorageError
from streamer.fs import location_key, resolve
from streamer.fs_s3 import UNSAFE_ENV, Conditional, S3Settings

pytestmark = [pytest.mark.s3, pytest.mark.integration]


#: The AWS variables a store's ``environ()`` sets; the "settings" route runs without them.
AWS_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")


@pytest.fixture(params=["env", "settings"])
def s3(request, s3_store):
    """A fresh folder in the store's bucket: (fs, path inside it), reached through the AWS
    variables ("env") or through explicit settings alone ("settings", as YAML gives them)."""
    settings = s3_store.settings() if request.param == "settings" else None
    with mock.patch.dict(os.environ):
        if settings is not None:
            for name in AWS_VARS:
                os.environ.pop(name, None)
        fs, path = resolve(f"s3://lake-bucket/fs-{uuid.uuid4().hex[:8]}", settings)
        yield fs, path
        fs.delete_dir(path)


def test_uri_spellings_resolve_to_the_local_endpoint(s3_store):
    for scheme in ("s3", "s3a", "s3n"):
        fs, path = resolve(f"{scheme}://lake-bucket/x/")
        assert path == "lake-bucket/x" and fs.conditional is not None
        assert fs.conditional.settings == S3Settings(s3_store.endpoint, "us-east-1")
    assert location_key("s3a://lake-bucket/x/") == "s3://lake-bucket/x"


def test_files_round_trip_and_list(s3):
    fs, p = s3
    fs.write_atomic(f"{p}/.hoodie/20240101.deltacommit", b"{}")
    fs.write_bytes(f"{p}/city=sf/a.parquet", b"x" * 10)
    with fs.arrow.open_output_stream(f"{p}/city=sf/big.log") as f:  # a multipart upload
        f.write(b"y" * (9 << 20))
    assert fs.read_bytes(f"{p}/.hoodie/20240101.deltacommit") == b"{}"
    assert fs.status(f"{p}/city=sf/big.log").size == 9 << 20
    with fs.open_input_file(f"{p}/city=sf/a.parquet") as f:  # random access (footers)
        f.seek(8)
        assert f.read() == b"xx"
    assert {s.name for s in fs.list_dir(p)} == {".hoodie", "city=sf"}
    assert fs.is_dir(f"{p}/city=sf") and not fs.is_dir(f"{p}/city=sf/a.parquet")
    assert sorted(s.name for s in fs.walk_files(p)) == ["20240101.deltacommit", "a.parquet", "big.log"]
    assert fs.list_dir(f"{p}/nothing") == []
    with pytest.raises(MissingFileError):
        fs.read_bytes(f"{p}/nothing")


def test_delete_dir_removes_nested_folders(s3):
    fs, p = s3
    for key in ("a/b/c/1", "a/b/2", "a/3", "4"):
        fs.write_bytes(f"{p}/{key}", b"1")
    fs.delete_dir(f"{p}/a")
    assert not fs.exists(f"{p}/a") and fs.exists(f"{p}/4")
    fs.delete_dir(f"{p}/a")  # absent: nothing to do


def test_create_exclusive_has_one_winner(s3):
    fs, p = s3
    path = f"{p}/lock"
    wins: list[bool] = []
    barrier = threading.Barrier(6)

    def go(i: int) -> None:
        barrier.wait()
        wins.append(fs.create_exclusive(path, f"owner-{i}".encode()))

    threads = [threading.Thread(target=go, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 5 + [True]
    assert fs.read_bytes(path).startswith(b"owner-")


def test_replace_if_is_compare_and_swap(s3):
    fs, p = s3
    path = f"{p}/lock"
    assert fs.create_exclusive(path, b"1")
    seen = fs.read_tagged(path)
    assert seen is not None and seen.data == b"1" and seen.tag
    assert fs.replace_if(path, b"2", seen.tag)
    assert not fs.replace_if(path, b"3", seen.tag)  # replaced since: refused
    assert fs.read_bytes(path) == b"2"
    assert fs.read_tagged(f"{p}/absent") is None


def test_a_store_ignoring_conditional_writes_is_refused(local_s3, monkeypatch):
    """A store whose probe failed (s3proxy 2.x ignores If-None-Match) must not run locks."""
    settings = S3Settings("http://127.0.0.1:1", "us-east-1")  # never contacted: the probe is cached
    monkeypatch.setitem(Conditional._probed, (settings.endpoint, "lake-bucket"), False)
    cond = Conditional(settings)
    with pytest.raises(StorageError) as e:
        cond.require("lake-bucket/t/.hoodie/.streamer_writer.lock")
    assert UNSAFE_ENV in str(e.value) and "If-None-Match" in str(e.value)
    monkeypatch.setenv(UNSAFE_ENV, "1")
    assert cond.require("lake-bucket/t/.hoodie/.streamer_writer.lock") is False


def test_secrets_are_never_in_errors(s3_store):
    secret = s3_store.environ()["AWS_SECRET_ACCESS_KEY"]
    for settings in (None, s3_store.settings()):
        fs, _ = resolve("s3://lake-bucket/x", settings)
        with pytest.raises(StorageError) as e:
            fs.conditional.require("no-such-bucket-here/x")  # the probe's PUT fails
        assert "NoSuchBucket" in str(e.value) and "the bucket does not exist there" in str(e.value)
        shown = [str(e.value), repr(e.value), repr(fs.conditional.settings), str(e.value.__cause__)]
        assert not any(secret in text for text in shown)


def test_explicit_settings_win_over_the_environment(s3_store):
    """Keys given as settings are the ones sent: wrong ones are refused by the store even
    though the AWS variables hold the right ones (no silent fallback to the environment)."""
    from dataclasses import replace

    from pydantic import SecretStr

    wrong = replace(s3_store.settings(), secret_access_key=SecretStr("wrong-Secret-4711"))
    fs, path = resolve(f"s3://lake-bucket/fs-{uuid.uuid4().hex[:8]}", wrong)
    with pytest.raises(OSError) as e:
        fs.write_bytes(f"{path}/a", b"1")
    assert "wrong-Secret-4711" not in str(e.value) and "wrong-Secret-4711" not in repr(e.value)
    with pytest.raises(StorageError) as e:  # a lock: the error says which setting to check
        fs.create_exclusive(f"{path}/lock", b"1")
    assert "check the credentials: the local S3 server.access_key_id and secret_access_key" in str(e.value) \
        or "check the credentials: MinIO.access_key_id" in str(e.value)
    assert "wrong-Secret-4711" not in str(e.value) and "wrong-Secret-4711" not in repr(e.value)
    fs, path = resolve(f"s3://lake-bucket/fs-{uuid.uuid4().hex[:8]}")  # the environment's keys
    fs.write_bytes(f"{path}/a", b"1")
    fs.delete_dir(path)


def test_a_filesystem_shipped_to_another_process_still_writes(s3_store, tmp_path):
    """What a Spark executor gets in a write context: the pickled filesystem, in a process
    where neither the AWS variables nor the checksum settings were ever set (s3proxy refused
    that process's uploads before the filesystem set them first when unpickled)."""
    import pickle
    import subprocess
    import sys

    from tests.support.fixture_tables import REPO

    fs, base = resolve(f"s3://lake-bucket/fs-{uuid.uuid4().hex[:8]}", s3_store.settings())
    (tmp_path / "fs.pickle").write_bytes(pickle.dumps(fs))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = str(REPO)
    code = ("import pickle, sys; fs = pickle.load(open(sys.argv[1], 'rb')); "
            "fs.write_bytes(sys.argv[2] + '/big', b'x' * (6 << 20)); print(len(fs.read_bytes(sys.argv[2] + '/big')))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "fs.pickle"), base], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == str(6 << 20), r.stderr[-2000:]
    fs.delete_dir(base)


@pytest.mark.s3
def test_a_conditional_put_whose_reply_was_lost_is_still_ours(local_s3):
    """The store applied the PUT, the reply was lost, the SDK retried and met its own
    object (412): a lock taken or a heartbeat swapped, not "someone else holds it"."""
    from tests.support.s3_faults import FaultProxy

    with FaultProxy(local_s3.endpoint, seed=1) as proxy:
        fs, base = resolve(f"s3://lake-bucket/lost-{uuid.uuid4().hex[:8]}",
                           s3=S3Settings(proxy.endpoint, "us-east-1", access_key_id=local_s3.access_key,
                                         secret_access_key=local_s3.settings().secret_access_key))
        path = f"{base}/.hoodie/.streamer_writer.lock"
        with proxy.window(rate=1.0, kinds=("lost-reply",), only=("lock",), budget=1):
            assert fs.create_exclusive(path, b"owner-a heartbeat-1")
        assert proxy.injected["lost-reply"] == 1
        seen = fs.read_tagged(path)
        with proxy.window(rate=1.0, kinds=("lost-reply",), only=("lock",), budget=1):
            assert fs.replace_if(path, b"owner-a heartbeat-2", seen.tag)
        assert proxy.injected["lost-reply"] == 2
        assert not fs.create_exclusive(path, b"owner-b heartbeat-1")  # someone else's: still refused
        assert fs.read_bytes(path) == b"owner-a heartbeat-2"


@pytest.mark.s3
def test_a_store_that_cannot_serve_a_read_is_reported_as_storage_not_damage(local_s3):
    """Every GET of the table's data files reset (a store restarting): the read fails as a
    storage error naming the file - never as a corrupt file for `repair --drop-damaged`."""
    import pyarrow as pa

    from streamer.errors import CorruptDataError
    from streamer.read import Table
    from streamer.table.identity import TableConfig
    from streamer.write.writer import HudiWriter
    from tests.support.s3_faults import FaultProxy

    uri = f"s3://lake-bucket/unserved-{uuid.uuid4().hex[:8]}"
    HudiWriter.create(uri, TableConfig("t", ("id",), (), "ts"),
                      schema=pa.schema([("id", pa.string()), ("ts", pa.int64())])).upsert(
        pa.table({"id": ["a", "b"], "ts": [1, 2]}))
    with FaultProxy(local_s3.endpoint, seed=2) as proxy:
        settings = S3Settings(proxy.endpoint, "us-east-1", access_key_id=local_s3.access_key,
                              secret_access_key=local_s3.settings().secret_access_key)
        fs, path = resolve(uri, s3=settings)
        with proxy.window(rate=1.0, kinds=("reset",), only=("data file",)), pytest.raises(StorageError) as e:
            Table.open(path, fs=fs).read()
    assert not isinstance(e.value, CorruptDataError), e.value
    assert proxy.injected["reset"] >= 1
    assert Table.open(uri).read().num_rows == 2  # the file was intact all along


class _InterruptedStreams:
    """``fs.arrow`` whose output streams are interrupted (KeyboardInterrupt, as Ctrl-C
    raises it) after they opened and before any byte was written."""

    def __init__(self, arrow) -> None:
        self._arrow = arrow

    def __getattr__(self, name):
        return getattr(self._arrow, name)

    def open_output_stream(self, path, *args, **kwargs):
        real = self._arrow.open_output_stream(path, *args, **kwargs)

        class Interrupted:
            def __enter__(self):
                return self

            def write(self, data):
                raise KeyboardInterrupt

            def __exit__(self, *exc):
                real.close()  # what pyarrow's stream does on any exit: uploads what it has
                return False

        return Interrupted()


def test_an_atomic_file_interrupted_mid_write_is_absent_not_empty(s3):
    """Ctrl-C inside pyarrow's S3 output stream closed it, and closing uploaded an empty
    object: a compactor interrupted while completing its instant left an empty
    ``.commit`` (the services campaign on s3proxy). An atomic file is now one whole PUT."""
    fs, p = s3
    target = f"{p}/.hoodie/20240101.commit"
    real = fs.arrow
    fs.arrow = _InterruptedStreams(real)
    try:
        with pytest.raises(KeyboardInterrupt):
            fs.write_bytes(f"{p}/probe", b"x")
        with contextlib.suppress(KeyboardInterrupt):
            fs.write_atomic(target, b"{}")
    finally:
        fs.arrow = real
    assert fs.read_bytes(f"{p}/probe") == b"", "the hazard: an interrupted stream uploads what it has"
    assert not fs.exists(target) or fs.read_bytes(target) == b"{}"
