"""Tables as another engine reads them, for tests that check a reader other than ours."""

from __future__ import annotations

import pyarrow as pa


def hudi_rs_table(path: str) -> pa.Table | None:
    """hudi-rs's snapshot read of the table at ``path``; None when it returns no batch
    (hudi-rs returns no schema for a table without rows)."""
    import hudi

    batches = hudi.HudiTableBuilder.from_base_uri(path).build().read()
    return pa.Table.from_batches(batches) if batches else None
