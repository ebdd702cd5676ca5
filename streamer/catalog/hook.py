"""The pipeline's after-commit catalog sync: reported, retried, never fatal.

Why a failed sync must not fail the commit: the commit is already durable and the
source position is in it; failing the batch would replay nothing and only stop the
pipeline because a catalog is down. Instead the error is logged (WARNING, naming the
table and the metastore) and kept in :attr:`CatalogHook.error` until a sync succeeds, and the next commit
syncs again - the sync is incremental from what the metastore last recorded
(``last_commit_time_sync``), so the partitions of the commits that missed their sync are
added then. A table nobody commits to any more is caught up by ``streamer sync``.
"""

from __future__ import annotations

import logging
import time

from streamer.catalog.sync import HiveSync, SyncResult
from streamer.config.target import HiveCatalogConfig, TargetConfig
from streamer.table.snapshot import TableSnapshot

log = logging.getLogger(__name__)


class CatalogHook:
    """Syncs a pipeline's table after each of its commits."""

    def __init__(self, config: HiveCatalogConfig, table_name: str, table_path: str, pipeline: str) -> None:
        self.sync = HiveSync(config, table_name, table_path)
        self.pipeline = pipeline
        #: The outstanding failure: the error of the syncs failing since the last success
        #: (None while syncs succeed). A status to report, not a call's result: each sync's
        #: result is what :meth:`after_commit` returns.
        self.error: str | None = None
        #: Syncs failed in a row (0 after a success).
        self.failures = 0

    def after_commit(self, snapshot: TableSnapshot) -> SyncResult | None:
        """Sync; on failure log and remember the error, and return None (never raises)."""
        started = time.monotonic()
        try:
            result = self.sync.sync(snapshot)
        except Exception as e:  # noqa: BLE001 - any failure is reported, the commit stands
            self.failures += 1
            self.error = str(e)
            log.warning("[%s] catalog sync failed (attempt %d in a row; retried after the next "
                        "commit): %s", self.pipeline, self.failures, e, extra={"pipeline": self.pipeline})
            return None
        if self.failures:
            log.info("[%s] catalog sync recovered after %d failed attempt(s)", self.pipeline, self.failures,
                     extra={"pipeline": self.pipeline})
        self.failures = 0
        self.error = None
        level = logging.INFO if result.changed else logging.DEBUG
        log.log(level, "[%s] %s (%.2fs)", self.pipeline, result.line(), time.monotonic() - started,
                extra={"pipeline": self.pipeline})
        return result


def catalog_hook(target: TargetConfig, pipeline: str) -> CatalogHook | None:
    """The hook for a pipeline's ``target:``, or None when it names no catalog."""
    if target.catalog is None:
        return None
    return CatalogHook(target.catalog, target.table_name or pipeline, target.path, pipeline)
