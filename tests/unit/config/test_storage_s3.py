"""``storage: {s3: ...}`` in YAML: validated, inherited from the top level, applied to every
location of its pipeline (and only its pipeline), secrets masked everywhere.

No server here: resolving an ``s3://`` path with an endpoint builds clients but sends
nothing, so what each location would talk to is read off its filesystem's settings.
"""

from __future__ import annotations

import logging
import pickle
import textwrap

import pytest
from pydantic import SecretStr

from streamer.config import parse_pipelines
from streamer.errors import StorageError
from streamer.fs import resolve
from streamer.fs_s3 import Conditional, S3Settings

SECRET = "Canary-S3-Secret-7f3a"
TOKEN = "Canary-S3-Token-19be"

TEXT = textwrap.dedent("""
storage:
  s3: {endpoint: "http://127.0.0.1:9001", region: eu-west-1, access_key_id: AKLOCAL,
       secret_access_key: "${SK}", session_token: "${TOK}"}
pipelines:
  - name: a
    source: {type: generator}
    target: {path: s3://bucket-a/lake/a, record_key: uuid}
  - name: b
    source: {type: generator}
    target: {path: s3a://bucket-b/lake/b, record_key: uuid}
    storage: {s3: {endpoint: "http://127.0.0.1:9002/", path_style: false}}
  - name: c
    source: {type: generator}
    target: {path: lake/c, record_key: uuid}
""")

AWS_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch):
    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)


def _parse(text: str = TEXT):
    pipelines, problems = parse_pipelines(text, env={"SK": SECRET, "TOK": TOKEN})
    return pipelines, problems


def test_top_level_storage_is_inherited_and_a_pipelines_own_replaces_it():
    (a, b, c), problems = _parse()
    assert problems == []
    assert a.storage.s3.endpoint == "http://127.0.0.1:9001" and a.storage.s3.region == "eu-west-1"
    assert a.storage.s3.secret_access_key.get_secret_value() == SECRET
    # b's own block replaces the inherited one whole (no keys of a's carried over)
    assert b.storage.s3.endpoint == "http://127.0.0.1:9002" and b.storage.s3.access_key_id is None
    assert b.storage.s3.path_style is False
    assert c.s3_settings() == a.s3_settings()  # a local table: inherited, simply unused
    s = a.s3_settings()
    assert s.source == "pipeline a: storage.s3" and s.session_token.get_secret_value() == TOKEN


def test_without_storage_nothing_changes():
    (p,), problems = parse_pipelines(TEXT.split("pipelines:")[0].replace("storage:", "x_unused:")
                                     .split("x_unused:")[0] + "pipelines:" + TEXT.split("pipelines:")[1]
                                     .split("  - name: b")[0], env={})
    assert problems == [] and p.storage is None and p.s3_settings() is None


@pytest.mark.parametrize(("block", "message"), [
    ("{access_key_id: AK}", "access_key_id and secret_access_key must be given together"),
    ('{secret_access_key: "${SK}"}', "access_key_id and secret_access_key must be given together"),
    ('{session_token: "${TOK}"}', "session_token needs access_key_id and secret_access_key"),
    ('{profile: p, access_key_id: AK, secret_access_key: "${SK}"}', "either profile or access_key_id"),
    ("{endpoint: 127.0.0.1:9000}", "must be a URL without a path"),
    ("{endpoint: 'http://127.0.0.1:9000/bucket'}", "must be a URL without a path"),
    ('{endpoint: "http://user:${SK}@127.0.0.1:9000"}', "must be a URL without a path"),
    ('{endpoint: "http://h:1", secret_key: "${SK}"}', "secret_key"),  # a typo is named
    ("{path_style: sometimes}", "path_style"),
])
def test_invalid_blocks_name_the_setting_never_the_secret(block, message):
    text = f"storage:\n  s3: {block}\n" + "pipelines:" + TEXT.split("pipelines:")[1]
    _, problems = _parse(text)
    assert problems, block
    shown = "\n".join(str(p) for p in problems)
    assert message in shown and "storage.s3" in shown
    assert SECRET not in shown and TOKEN not in shown


def test_blank_interpolations_mean_unset():
    text = TEXT.replace('"${SK}"', '"${NOPE_SK:-}"').replace("access_key_id: AKLOCAL,", "access_key_id: '',") \
        .replace('session_token: "${TOK}"', 'session_token: ""')
    (a, _, _), problems = _parse(text)
    assert problems == []
    assert a.storage.s3.access_key_id is None and a.storage.s3.secret_access_key is None


def test_secrets_are_masked_in_every_rendering(caplog):
    (a, b, _), _ = _parse()
    settings = a.s3_settings()
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("test").info("config %s %r %r", a, a, settings)
    shown = [repr(a), str(a), a.model_dump_json(), str(a.model_dump()), a.summary(), b.summary(),
             repr(settings), str(settings), repr(a.storage), caplog.text]
    for text in shown:
        assert SECRET not in text and TOKEN not in text
    assert "s3=http://127.0.0.1:9001" in a.summary()


def test_every_location_of_a_pipeline_uses_its_own_store():
    """Table, error table and lease of each pipeline resolve with that pipeline's settings;
    two pipelines of one run keep two stores (nothing global carries one into the other)."""
    from streamer.pipeline.runner import PipelineRunner

    (a, b, c), _ = _parse()
    ra, rb, rc = PipelineRunner(a), PipelineRunner(b), PipelineRunner(c)
    for runner, endpoint in ((ra, "http://127.0.0.1:9001"), (rb, "http://127.0.0.1:9002")):
        lease = runner.lease()
        for fs in (runner.sink.fs, runner.errors.sink.fs, lease.fs):
            assert fs.conditional is not None
            assert fs.conditional.settings.endpoint == endpoint, runner.config.name
    assert ra.sink.fs.conditional.settings.access_key_id == "AKLOCAL"
    assert ra.sink.fs.conditional.settings.region == "eu-west-1"
    assert rb.sink.fs.conditional.settings.access_key_id is None  # the AWS chain, not a's keys
    assert rb.sink.fs.conditional.settings.path_style is False
    assert ra.errors.sink.path == "bucket-a/lake/_errors/a" and ra.lease().path.startswith("bucket-a/lake/_checkpoints/a/")
    assert rc.sink.fs.is_local  # a local table is untouched by storage


def test_settings_fill_from_the_environment_field_by_field(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9999")
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    fs, path = resolve("s3://bkt/x?region=us-west-2", S3Settings(access_key_id="AK",
                                                                 secret_access_key=SecretStr(SECRET)))
    s = fs.conditional.settings
    assert (s.endpoint, s.region, s.access_key_id, path) == ("http://127.0.0.1:9999", "us-west-2", "AK", "bkt/x")
    fs, _ = resolve("s3://bkt/x", S3Settings(endpoint="http://127.0.0.1:1234"))
    assert fs.conditional.settings.endpoint == "http://127.0.0.1:1234"  # YAML over the environment
    assert fs.conditional.settings.region == "ap-south-1"


def test_store_setting_errors_name_the_setting(tmp_path, monkeypatch):
    with pytest.raises(StorageError, match=r"pipeline x: storage.s3.path_style: true needs an endpoint"):
        S3Settings(region="us-east-1", path_style=True, source="pipeline x: storage.s3").arrow()
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    with pytest.raises(StorageError, match=r"storage.s3.profile: .*nope"):
        S3Settings(endpoint="http://127.0.0.1:1", profile="nope", source="storage.s3").arrow()


def test_a_profile_gives_region_and_credentials(tmp_path, monkeypatch):
    (tmp_path / "config").write_text("[profile lake]\nregion = eu-north-1\n")
    (tmp_path / "credentials").write_text(f"[lake]\naws_access_key_id = AKPROFILE\naws_secret_access_key = {SECRET}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    s = S3Settings(endpoint="http://127.0.0.1:1", profile="lake")
    assert s._credentials() == ("AKPROFILE", SECRET, None) and s._profile_region() == "eu-north-1"
    fs, _ = resolve("s3://bkt/x", S3Settings(profile="lake"))  # no endpoint: region from the profile
    assert fs.arrow.region == "eu-north-1"
    client = Conditional(s).client
    assert client.meta.region_name == "eu-north-1"
    assert SECRET not in repr(s)


def test_a_conditional_ships_to_executors_without_its_client():
    (a, _, _), _ = _parse()
    cond = Conditional(a.s3_settings())
    assert cond.client is not None  # built on the driver
    copy = pickle.loads(pickle.dumps(cond))
    assert copy._client is None and copy.settings == cond.settings
    assert copy.settings.secret_access_key.get_secret_value() == SECRET


def test_an_unreachable_endpoint_names_the_setting():
    cond = Conditional(S3Settings(endpoint="http://127.0.0.1:1", region="us-east-1", access_key_id="AK",
                                  secret_access_key=SecretStr(SECRET), source="pipeline x: storage.s3"))
    with pytest.raises(StorageError) as e:
        cond.put("bkt/lock", b"1", if_none_match=True)
    assert "S3 endpoint not reachable" in str(e.value) and "pipeline x: storage.s3.endpoint" in str(e.value)
    assert SECRET not in str(e.value) and e.value.__cause__ is None


def test_missing_credentials_name_where_they_are_looked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role lookup here
    cond = Conditional(S3Settings(endpoint="http://127.0.0.1:1", region="us-east-1"))
    with pytest.raises(StorageError, match=r"no usable S3 credentials .*AWS credential chain"):
        cond.put("bkt/lock", b"1", if_none_match=True)
