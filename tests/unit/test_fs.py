"""``streamer.fs.resolve``: every spelling of a location a Hadoop/Spark user writes."""

from __future__ import annotations

import os

import pytest

from streamer.errors import StorageError
from streamer.fs import location_key, resolve


@pytest.mark.parametrize("spelling", ["file:{p}", "file://{p}", "file://localhost{p}", "{p}", "{p}/",
                                      "file:{p}/"])
def test_local_spellings_resolve_to_one_absolute_path(tmp_path, spelling):
    p = str(tmp_path / "lake" / "t")
    fs, path = resolve(spelling.format(p=p))
    assert fs.is_local
    assert path == p
    assert location_key(spelling.format(p=p)) == p


def test_relative_paths_are_made_absolute_from_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fs, path = resolve("lake/t")
    assert fs.is_local and path == f"{tmp_path}/lake/t"


def test_a_colon_in_a_plain_path_is_not_a_scheme(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve("day:2024")[1] == f"{tmp_path}/day:2024"


def test_file_uris_decode_percent_escapes(tmp_path):
    assert resolve(f"file://{tmp_path}/a%20b")[1] == f"{tmp_path}/a b"


def test_a_file_uri_on_another_host_is_refused():
    with pytest.raises(StorageError, match="host 'nas'"):
        resolve("file://nas/share/t")


@pytest.mark.parametrize("scheme", ["s3", "s3a", "s3n"])
def test_s3_uris_go_to_pyarrows_s3_filesystem_without_network(scheme, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    fs, path = resolve(f"{scheme}://bucket/lake/t/")
    assert fs.arrow.type_name == "s3"
    assert fs.arrow.region == "eu-west-1"
    assert path == "bucket/lake/t"
    assert not fs.supports_atomic_rename
    assert location_key(f"{scheme}://bucket/lake/t/") == "s3://bucket/lake/t"


def test_s3_uri_options_are_pyarrows(monkeypatch):
    monkeypatch.delenv("AWS_REGION", raising=False)
    fs, path = resolve("s3://bucket/t?region=ap-south-1&endpoint_override=localhost:9000&scheme=http")
    assert fs.arrow.type_name == "s3" and fs.arrow.region == "ap-south-1"
    assert path == "bucket/t"


def test_writes_through_a_file_uri_land_in_the_local_folder(tmp_path):
    fs, path = resolve(f"file:{tmp_path}/x")
    fs.write_bytes(path + "/f.txt", b"hi")
    assert os.path.exists(tmp_path / "x" / "f.txt")


def test_a_read_the_store_failed_to_serve_is_a_storage_error_not_damage():
    import pyarrow as pa

    from streamer.errors import StorageError
    from streamer.fs import read_failure

    network = OSError("When reading information for key 'k' in bucket 'b': AWS Error NETWORK_CONNECTION "
                      "during HeadObject operation: curlCode: 7, Could not connect to server")
    failed = read_failure(network, "b/k", "reading a base file")
    assert isinstance(failed, StorageError) and "b/k" in str(failed) and "failed to serve" in str(failed)
    assert isinstance(read_failure(OSError(5, "Input/output error"), "p", "reading"), StorageError)
    # bytes that arrived and do not decode stay damage (the caller's CorruptDataError)
    assert read_failure(OSError("Couldn't deserialize thrift: TProtocolException: Invalid data"), "p", "r") is None
    assert read_failure(pa.ArrowInvalid("Parquet magic bytes not found in footer"), "p", "r") is None
