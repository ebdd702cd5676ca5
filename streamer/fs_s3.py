"""S3 and S3-compatible stores: where the filesystem seam differs from a local disk.

Reads, writes, listings and deletes go through :class:`pyarrow.fs.S3FileSystem` like any
other store; what an object store cannot do the local way gets its own path here:

* **Atomic files** (completed instants, properties, log files): one PUT is atomic - the
  object appears whole or not at all - so no temp file and no rename (an S3 "rename" is a
  copy plus a delete, visible half-done).
* **Exclusive create** (the writer lock, plan locks, the pipeline lease): a conditional
  PUT, ``If-None-Match: *``, through boto3 - pyarrow cannot send one. Exactly one of many
  concurrent creators gets 200; the others get ``412 PreconditionFailed``.
* **Compare-and-swap** (a lock's heartbeat): ``If-Match: <etag>``, so a holder that stalled
  past its expiry cannot overwrite the lock its successor took.

A store that ignores conditional headers would let two writers both take a lock. The
first exclusive create per bucket therefore probes it (two conditional PUTs of one new
key: the second must fail) and, if the store does not honour them, refuses with an error
naming :data:`UNSAFE_ENV` - the operator's statement that only one writer ever runs.

Settings come from a pipeline's YAML (``storage: {s3: {...}}``, see
:class:`streamer.config.pipeline.S3StorageConfig`) field by field over the usual AWS chain:
``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL`` for an S3-compatible endpoint,
``AWS_REGION``/``AWS_DEFAULT_REGION``, and credentials from the environment, ``~/.aws``
profiles or instance roles (read by pyarrow and boto3 themselves). Secrets given in YAML
are held as :class:`pydantic.SecretStr` and handed over only to pyarrow's and boto3's
constructors: no repr, error or log line built here contains one.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyarrow.fs as pafs
from pydantic import SecretStr

from streamer.errors import StorageError

#: Set to 1 to run on a store without conditional writes, promising a single writer.
UNSAFE_ENV = "MOR_STREAMER_S3_SINGLE_WRITER_UNSAFE"

#: Pause before an exclusive create reads its object back (see :meth:`Conditional.create`).
CONFIRM_S = 0.1

#: Error codes of a refused identity (wrong, unknown or expired credentials).
_AUTH_CODES = frozenset({"SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "ExpiredToken",
                         "InvalidToken", "TokenRefreshRequired", "InvalidClientTokenId", 403, "403"})

#: Without these, pyarrow's AWS SDK (>= 1.11.4xx) sends streaming checksums that several
#: S3-compatible servers (s3proxy, older MinIO) reject with XAmzContentSHA256Mismatch.
#: AWS itself is fine either way; only set for a custom endpoint, and only if unset.
_CHECKSUM_ENV = {"AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED",
                 "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED"}


@dataclass(frozen=True)
class S3Settings:
    """Where the S3 API answers and who we are there; ``None`` fields: the AWS chain.

    ``endpoint`` None means AWS itself. Credentials: ``access_key_id`` with
    ``secret_access_key`` (and ``session_token`` for temporary ones), or a named
    ``profile`` of ``~/.aws``, or neither (the SDKs' default chain). ``path_style``: None =
    path-style for a custom endpoint, virtual-hosted for AWS. ``source`` names where the
    settings came from (``pipeline trips: storage.s3``), for error messages. Secrets and the
    key id are left out of ``repr``.
    """

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: SecretStr | None = field(default=None, repr=False)
    session_token: SecretStr | None = field(default=None, repr=False)
    profile: str | None = None
    path_style: bool | None = None
    source: str = field(default="the AWS environment", compare=False)

    @classmethod
    def from_env(cls, query: str = "") -> S3Settings:
        """From ``?endpoint_override=&scheme=&region=`` of a URI, else the AWS variables."""
        return cls().resolved(query)

    def resolved(self, query: str = "") -> S3Settings:
        """These settings completed for one location: a URI's ``?endpoint_override=&scheme=
        &region=`` first (the most specific), then what is set here, then the AWS variables."""
        q = {k: v[-1] for k, v in parse_qs(query).items()}
        endpoint = q.get("endpoint_override") or self.endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") \
            or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and "://" not in endpoint:
            endpoint = f"{q.get('scheme', 'https')}://{endpoint}"
        region = q.get("region") or self.region or os.environ.get("AWS_REGION") \
            or os.environ.get("AWS_DEFAULT_REGION")
        return replace(self, endpoint=endpoint or None, region=region or None)

    def credentials_origin(self) -> str:
        """Where the credentials come from, for an error message (names, never values)."""
        if self.access_key_id:
            return f"{self.source}.access_key_id and secret_access_key"
        if self.profile:
            return f"{self.source}.profile ({self.profile})"
        return ("the AWS credential chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws, "
                "instance role)")

    def endpoint_origin(self) -> str:
        """Which setting named the endpoint, for an error message."""
        if self.source.endswith("storage.s3"):
            return f"{self.source}.endpoint or, unset there, AWS_ENDPOINT_URL_S3/AWS_ENDPOINT_URL"
        return "AWS_ENDPOINT_URL_S3/AWS_ENDPOINT_URL or the URI's ?endpoint_override="

    @property
    def explicit(self) -> bool:
        """Whether credentials are given here (keys or a profile), not left to the SDKs."""
        return bool(self.access_key_id or self.profile)

    def _credentials(self) -> tuple[str, str, str | None] | None:
        """(key id, secret, token) to hand to a client; None: the SDKs' default chain."""
        if self.access_key_id:
            if self.secret_access_key is None:
                raise StorageError(f"{self.source}: access_key_id needs secret_access_key", "s3://")
            token = self.session_token.get_secret_value() if self.session_token else None
            return self.access_key_id, self.secret_access_key.get_secret_value(), token
        if self.profile:
            creds = self._boto_session().get_credentials()
            if creds is None:
                raise StorageError(f"{self.source}: the AWS profile {self.profile!r} gives no credentials",
                                   "s3://")
            # read once: pyarrow cannot follow a profile; temporary credentials of a profile
            # (SSO, assumed roles) are not renewed for pyarrow's reads and writes
            frozen = creds.get_frozen_credentials()
            return frozen.access_key, frozen.secret_key, frozen.token
        return None

    def _boto_session(self) -> Any:
        try:
            import boto3
            from botocore.exceptions import BotoCoreError
        except ImportError as e:  # pragma: no cover - a dependency of the project
            raise StorageError("S3 needs boto3 (pip install boto3)", "s3://") from e
        try:
            return boto3.Session(profile_name=self.profile) if self.profile else boto3.Session()
        except BotoCoreError as e:  # ProfileNotFound names only the profile
            raise StorageError(f"{self.source}.profile: {e}", "s3://") from None

    def _profile_region(self) -> str | None:
        return self._boto_session().region_name if self.profile else None

    def arrow(self) -> pafs.S3FileSystem:
        """pyarrow's S3 filesystem for these settings."""
        kwargs: dict[str, Any] = {}
        region = self.region or self._profile_region()
        if region:
            kwargs["region"] = region
        creds = self._credentials()
        if creds is not None:
            kwargs["access_key"], kwargs["secret_key"], kwargs["session_token"] = creds
        if self.endpoint:
            custom_endpoint_environ()
            url = urlsplit(self.endpoint)
            kwargs["endpoint_override"] = url.netloc
            kwargs["scheme"] = url.scheme or "https"
            # path-style addressing for S3-compatible servers (no per-bucket DNS names)
            # unless path_style: false asks for virtual-hosted bucket names
            kwargs["force_virtual_addressing"] = self.path_style is False
            kwargs.setdefault("region", "us-east-1")
        elif self.path_style:
            raise StorageError(f"{self.source}.path_style: true needs an endpoint (AWS S3 itself is "
                               "addressed virtual-hosted)", "s3://")
        return pafs.S3FileSystem(**kwargs)

    def boto3_client(self) -> Any:
        """A boto3 S3 client for these settings (conditional PUTs)."""
        from botocore.config import Config

        addressing: dict[str, str] = {}
        if self.endpoint or self.path_style is not None:
            path = self.path_style if self.path_style is not None else True
            addressing = {"addressing_style": "path" if path else "virtual"}
        config = Config(retries={"max_attempts": 3, "mode": "standard"}, s3=addressing)
        kwargs: dict[str, Any] = {"endpoint_url": self.endpoint, "config": config,
                                  "region_name": self.region or self._profile_region() or "us-east-1"}
        if self.access_key_id:
            creds = self._credentials()
            assert creds is not None
            kwargs.update(aws_access_key_id=creds[0], aws_secret_access_key=creds[1],
                          aws_session_token=creds[2])
        # a profile: the session follows it (and renews what it gives)
        return self._boto_session().client("s3", **kwargs)


def custom_endpoint_environ() -> None:
    """Set :data:`_CHECKSUM_ENV` (only where unset) before this process's AWS SDK builds a
    client for a custom endpoint: also in a process a filesystem is unpickled in (a Spark
    executor), which never ran :meth:`S3Settings.arrow`."""
    for key, value in _CHECKSUM_ENV.items():
        os.environ.setdefault(key, value)


def _split(path: str) -> tuple[str, str]:
    bucket, _, key = path.lstrip("/").partition("/")
    if not bucket or not key:
        raise StorageError("an S3 path needs a bucket and a key", path)
    return bucket, key


class Conditional:
    """Conditional PUTs on one store (boto3: pyarrow has none), probed once per bucket."""

    _probed: dict[tuple[str | None, str], bool] = {}
    _probe_lock = threading.Lock()

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.settings.boto3_client()
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        # shipped to Spark executors inside a write context: a boto3 client does not
        # pickle, so each process builds its own
        return {**self.__dict__, "_client": None}

    def put(self, path: str, data: bytes, *, if_none_match: bool = False,
            if_match: str | None = None) -> str | None:
        """PUT ``data``; the new ETag, or ``None`` if the condition failed.

        **A failed condition may be our own earlier attempt.** When a conditional PUT
        lands but its reply is lost (a reset, a timeout after the store applied it), the
        SDK sends it again, and the retry meets the object the first attempt wrote: 412.
        Taken at its word, a writer would then wait out its *own* lock's expiry (or give up
        a lock it holds). Every conditional body here names a unique owner and a
        heartbeat, so an object holding exactly ``data`` is our write: its ETag is returned.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = _split(path)
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": data}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        try:
            return str(self.client.put_object(**kwargs)["ETag"])
        except ClientError as e:
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = e.response.get("Error", {}).get("Code")
            # 412: the condition failed; 409: a concurrent conditional write to the key won
            if status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict"):
                return self._ours(path, data)
            if code != "NoSuchBucket" and (code in ("NoSuchKey", "404") or status == 404):
                return None  # If-Match on a key deleted meanwhile
            raise self._failed("PUT", code or status, path) from e
        except BotoCoreError as e:
            raise self._unreachable(e, path) from None

    def _ours(self, path: str, data: bytes) -> str | None:
        """The ETag of ``path`` if it holds exactly ``data`` (see :meth:`put`), else None."""
        got = self.get(path)
        return got[1] if got is not None and got[0] == data else None

    def create(self, path: str, data: bytes) -> bool:
        """Exclusive create: ``If-None-Match: *``, then confirmed by reading it back.

        Why the read-back: AWS and MinIO decide the condition atomically, but some
        S3-compatible servers check-then-write (s3proxy 3.0: two racing creators can both
        get 200, the later body wins). Reading the object back after any write that
        passed the same check has landed (:data:`CONFIRM_S`) leaves one winner there too;
        on AWS it costs one GET and that pause per lock taken.
        """
        etag = self.put(path, data, if_none_match=True)
        if etag is None:
            return False
        time.sleep(CONFIRM_S)
        got = self.get(path)
        return got is not None and got[1] == etag

    def get(self, path: str) -> tuple[bytes, str] | None:
        """The object's bytes and ETag (``None``: absent)."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = _split(path)
        try:
            r = self.client.get_object(Bucket=bucket, Key=key)
            return r["Body"].read(), str(r["ETag"])  # the body streams: its read fails as the call does
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404"):
                return None
            raise self._failed("GET", code, path) from e
        except BotoCoreError as e:
            raise self._unreachable(e, path) from None

    def delete(self, path: str) -> None:
        """Delete one object (absent is fine, as S3 answers)."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = _split(path)
        try:
            self.client.delete_object(Bucket=bucket, Key=key)
        except ClientError as e:
            raise self._failed("DELETE", e.response.get("Error", {}).get("Code"), path) from e
        except BotoCoreError as e:
            raise self._unreachable(e, path) from None

    def _failed(self, op: str, code: object, path: str) -> StorageError:
        """A refused request, saying which setting to look at (never a value of a secret)."""
        where = self.settings.endpoint or "AWS S3"
        message = f"S3 {op} failed ({code}) at {where}"
        if code in _AUTH_CODES:
            message += f"; check the credentials: {self.settings.credentials_origin()}"
        elif code == "NoSuchBucket":
            message += f"; the bucket does not exist there (endpoint from {self.settings.endpoint_origin()})"
        return StorageError(message, path)

    def _unreachable(self, e: Exception, path: str) -> StorageError:
        """A request that got no answer (or found no credentials to sign with); botocore's
        message names the URL it tried, never a credential."""
        from botocore.exceptions import (
            ConnectionError,
            CredentialRetrievalError,
            HTTPClientError,
            NoCredentialsError,
            PartialCredentialsError,
        )

        if isinstance(e, NoCredentialsError | PartialCredentialsError | CredentialRetrievalError):
            return StorageError(f"no usable S3 credentials ({e}); check {self.settings.credentials_origin()}",
                                path)
        if isinstance(e, ConnectionError | HTTPClientError):
            return StorageError(f"S3 endpoint not reachable ({e}); check {self.settings.endpoint_origin()}",
                                path)
        return StorageError(f"S3 request failed ({type(e).__name__}: {e})", path)

    def honoured(self, path: str) -> bool:
        """Whether this store rejects a second ``If-None-Match: *`` PUT (cached per bucket)."""
        bucket, _ = _split(path)
        cache_key = (self.settings.endpoint, bucket)
        with self._probe_lock:
            if cache_key not in self._probed:
                probe = f"{bucket}/.mor-streamer-probe/{uuid.uuid4().hex}"
                try:
                    first = self.put(probe, b"1", if_none_match=True)
                    second = self.put(probe, b"2", if_none_match=True)
                finally:
                    with contextlib.suppress(StorageError):
                        self.delete(probe)
                self._probed[cache_key] = first is not None and second is None
            return self._probed[cache_key]

    def require(self, path: str) -> bool:
        """``True`` if conditional writes work; raise unless the operator vouched for one writer."""
        if self.honoured(path):
            return True
        if os.environ.get(UNSAFE_ENV) == "1":
            return False
        where = self.settings.endpoint or "AWS S3"
        raise StorageError(
            f"the S3 store at {where} does not honour conditional writes (If-None-Match: *), so "
            "two writers could both take the table's lock; use a store that does (AWS S3, MinIO, "
            f"s3proxy >= 3.0), or set {UNSAFE_ENV}=1 if you guarantee that only one writer, "
            "service runner and pipeline instance ever runs per table", path)
