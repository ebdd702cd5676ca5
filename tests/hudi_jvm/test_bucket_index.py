"""Our bucket-index tables are Hudi bucket-index tables: Apache Hudi computes the same
buckets, reads them, and - configured with the same bucket index - writes into our file
groups (no hand-over: a key's file group is its hash, so no index has to find it).

Sequence: our writer (4 buckets, several commits with updates and deletes) -> Hudi 0.15
reads, computes buckets, upserts -> Hudi 1.0 reads, computes buckets, upserts and
deletes -> our writer upserts and deletes -> every reader equals the model. JVM work is
batched: one round trip per Hudi version and step.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamer.index.bucket import bucket_ids, bucket_of_file_id
from streamer.read import Table
from streamer.table.identity import IndexConfig, IndexType
from streamer.write import HudiWriter, TableConfig
from tests.support import block_tables as tg
from tests.support.hudi import HudiOracleError, HudiSpark
from tests.support.hudi_options import HUDI_WRITE, V6

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]

BUCKETS = 4
#: A Hudi writer of the table: what ``IndexConfig.hudi_write_options`` says it must set
#: (``hoodie.index.type=BUCKET``, SIMPLE engine, the bucket count and hash fields).
HUDI_BUCKET = {
    **HUDI_WRITE,
    "hoodie.metadata.enable": "false",
    **IndexConfig(IndexType.BUCKET, BUCKETS, ("id",)).hudi_write_options(),
}
#: Keys whose bucket Hudi 0.15 and 1.0 agree on, and ours must too (1000 buckets: a
#: wrong hash cannot match by chance). Non-ASCII and surrogate pairs test UTF-16.
AGREED_KEYS = [str(i) for i in range(40)] + [
    "", "key-é", "日本語", "x😀y", "\U00010348", "a,b", "id:1,name:x", "name:y,id:2",
    "id:__null__,name:z", "id:__empty__,name:z",
]
#: Keys Hudi 1.0 parses differently from 0.15 (we follow 1.0): ':' but no ',' (1.0 hashes
#: the whole key, 0.15 the parsed value), and a value holding ',' (1.0 keeps "1,2" as one
#: value, 0.15 splits it). Only 1.0 is asked.
V10_ONLY_KEYS = ["12:30", "id:5", "id:1,2,name:3", "id:x:y,name:3"]


def _sql_values(keys: list[str]) -> str:
    return ", ".join("('" + k.replace("'", "''") + "')" for k in keys)


def _bucket_sql(session: HudiSpark, keys: list[str], n: int) -> dict:
    return {
        "op": "sql",
        "sql": "SELECT k, CAST(reflect('org.apache.hudi.index.bucket.BucketIdentifier', "
               f"'getBucketId', k, 'id', {n}) AS INT) AS b FROM VALUES {_sql_values(keys)} AS t(k)",
        "out": session._out(),
    }


def _write_req(session: HudiSpark, path: str, rows: pa.Table, opts: dict) -> dict:
    staged = session.workdir / f"rows-{next(session._ids)}.parquet"
    pq.write_table(rows, staged)
    return {"op": "write", "path": path, "rows": str(staged), "mode": "append",
            "options": {k: str(v) for k, v in opts.items()}, "columns_sql": None}


def _run(session: HudiSpark, requests: list[dict]) -> list:
    """One round trip; each read/sql answer as an Arrow table, a write's as its dict."""
    answer = session.request({"op": "batch", "requests": requests})
    out = []
    for req, res in zip(requests, answer["results"], strict=True):
        if "ok" not in res:
            raise HudiOracleError(f"Hudi {session.version}: {res.get('error')}", res.get("detail", ""))
        if req.get("out"):
            with pa.memory_map(req["out"]) as src:
                out.append(pa.ipc.open_file(src).read_all())
            os.unlink(req["out"])
        else:
            out.append(res["ok"])
    return out


def _assert_buckets(answer: pa.Table, n: int, version: str) -> None:
    keys = answer.column("k").to_pylist()
    ours = bucket_ids(pa.array(keys, pa.string()), n, ["id"]).tolist()
    assert ours == answer.column("b").to_pylist(), f"Hudi {version} buckets differ"


def _groups(path: str) -> dict[tuple[str, int], str]:
    """(partition, bucket) -> file id; fails on two groups in one bucket."""
    out: dict[tuple[str, int], str] = {}
    for g in Table.open(path).fsview.file_groups():
        key = (g.partition_path, bucket_of_file_id(g.file_id))
        assert key[1] is not None and key[1] < BUCKETS, g.file_id
        assert key not in out, f"two file groups in bucket {key}: {out[key]}, {g.file_id}"
        out[key] = g.file_id
    return out


def _canon(t: pa.Table) -> list[dict]:
    return tg.canon(t.select(tg.COLUMNS))


def _rows(ids: list[int], city: str, ts: int, tag: str) -> pa.Table:
    return pa.table({"id": ids, "city": [city] * len(ids), "ts": [ts] * len(ids),
                     "value": [f"{tag}{i}" for i in ids]}, schema=tg.SCHEMA)


def _assert_layout(path: str, model: tg.Model) -> None:
    """Every row sits in the file group of its bucket, and no key twice (our reader)."""
    snap = Table.open(path).read()
    keys = list(zip(snap.column("city").to_pylist(), snap.column("id").to_pylist(), strict=True))
    assert len(keys) == len(set(keys)), "duplicate keys"
    want = bucket_ids(snap.column("_hoodie_record_key"), BUCKETS, ["id"]).tolist()
    got = [bucket_of_file_id(f) for f in snap.column("_hoodie_file_name").to_pylist()]
    assert got == want
    assert tg.read_ours(path) == model.snapshot()


def test_hudi_reads_and_continues_our_bucket_index_table(tmp_path, hudi015, hudi10):
    path = str(tmp_path / "t")
    cfg = TableConfig("svc", ("id",), ("city",), "ts", index=IndexConfig(IndexType.BUCKET, BUCKETS))
    w = HudiWriter.create(path, cfg, schema=tg.SCHEMA, options=tg.SMALL)
    gen, model = tg.Gen(11, key_space=80), tg.Model()
    for i in range(6):
        tg.step(w, gen, model, rows=30, delete=(i % 3 == 2))
    _assert_layout(path, model)
    assert tg.read_hudi_rs(path) == model.snapshot()
    ours_before = _groups(path)

    # -- Hudi 0.15: read, the same buckets, an upsert of existing and new keys (one new partition)
    existing = sorted(model.rows)[:12]
    h15 = pa.concat_tables([
        pa.Table.from_pylist([{"id": k[1], "city": k[0], "ts": 1000, "value": "h15"} for k in existing],
                             schema=tg.SCHEMA),
        _rows(list(range(500, 520)), "sf", 1000, "h15n"),
        _rows(list(range(600, 606)), "berlin", 1000, "h15b"),
    ])
    read15, buckets15, _ = _run(hudi015, [
        hudi015.read_request(path),
        _bucket_sql(hudi015, AGREED_KEYS, 1000),
        _write_req(hudi015, path, h15, HUDI_BUCKET),
    ])
    assert _canon(read15) == model.snapshot(), "Hudi 0.15 reads our table differently"
    _assert_buckets(buckets15, 1000, "0.15")
    model.apply(h15)
    after15 = _groups(path)
    for bucket, fid in ours_before.items():
        assert after15[bucket] == fid, f"Hudi 0.15 left our file group of bucket {bucket}"
    assert any(part == "berlin" for part, _ in after15), "Hudi 0.15 opened the new partition's buckets"

    # -- Hudi 1.0 (writing version 6): read, buckets, an upsert and a delete
    h10 = pa.concat_tables([
        _rows([k[1] for k in sorted(model.rows)[20:30] if k[0] == "nyc"], "nyc", 2000, "h10"),
        _rows(list(range(500, 505)), "sf", 2000, "h10u"),  # keys Hudi 0.15 inserted
        _rows(list(range(700, 710)), "oslo", 2000, "h10n"),
    ])
    d10 = pa.Table.from_pylist([{"id": k[1], "city": k[0], "ts": 2001, "value": None}
                                for k in sorted(model.rows)[-8:]], schema=tg.SCHEMA)
    read10, buckets10, more10, _, _ = _run(hudi10, [
        hudi10.read_request(path),
        _bucket_sql(hudi10, AGREED_KEYS, 1000),
        _bucket_sql(hudi10, V10_ONLY_KEYS, 1000),
        _write_req(hudi10, path, h10, {**HUDI_BUCKET, **V6}),
        _write_req(hudi10, path, d10, {**HUDI_BUCKET, **V6, "hoodie.datasource.write.operation": "delete"}),
    ])
    assert _canon(read10) == model.snapshot(), "Hudi 1.0 reads the table differently"
    _assert_buckets(buckets10, 1000, "1.0")
    _assert_buckets(more10, 1000, "1.0")
    model.apply(h10)
    model.apply(deletes=d10)
    after10 = _groups(path)
    for bucket, fid in after15.items():
        assert after10[bucket] == fid, f"Hudi 1.0 left the file group of bucket {bucket}"
    _assert_layout(path, model)

    # -- ours again: updates of keys both Hudi versions wrote, inserts, a delete
    w = HudiWriter.open(path, options=tg.SMALL)
    # Hudi's writes kept our index keys in hoodie.properties (its own keys untouched by them)
    assert w.config.index == IndexConfig(IndexType.BUCKET, BUCKETS, ("id",))
    ours = pa.concat_tables([
        _rows(list(range(600, 606)), "berlin", 3000, "o"),
        _rows(list(range(500, 510)), "sf", 3000, "o"),
        _rows(list(range(800, 830)), "nyc", 3000, "on"),
    ])
    w.upsert(ours)
    model.apply(ours)
    gone = _rows([700, 701, 602], "oslo", 3001, "")
    gone = pa.concat_tables([gone.slice(0, 2), _rows([602], "berlin", 3001, "")])
    w.delete(gone)
    model.apply(deletes=gone)
    final = _groups(path)
    for bucket, fid in after10.items():
        assert final[bucket] == fid, f"our writer left the file group of bucket {bucket}"
    _assert_layout(path, model)
    assert tg.read_hudi_rs(path) == model.snapshot()
    (snap15,) = _run(hudi015, [hudi015.read_request(path)])
    (snap10,) = _run(hudi10, [hudi10.read_request(path)])
    assert _canon(snap15) == model.snapshot(), "Hudi 0.15 after our last writes"
    assert _canon(snap10) == model.snapshot(), "Hudi 1.0 after our last writes"


def test_we_continue_a_bucket_index_table_hudi_created(tmp_path, hudi015, hudi10):
    """Hudi records its bucket index in no table property: our writer adopts the layout
    (every group and key checked once), records it, and the writers keep alternating."""
    path = str(tmp_path / "hudi_made")
    first = pa.concat_tables([_rows(list(range(0, 40)), "sf", 1, "a"), _rows(list(range(0, 30)), "nyc", 1, "a")])
    second = pa.concat_tables([_rows(list(range(20, 60)), "sf", 2, "b"), _rows(list(range(0, 5)), "oslo", 2, "b")])
    _run(hudi015, [
        {**_write_req(hudi015, path, first, HUDI_BUCKET), "mode": "overwrite"},
        _write_req(hudi015, path, second, HUDI_BUCKET),
    ])
    model = tg.Model()
    model.apply(first)
    model.apply(second)
    hudi_groups = _groups(path)
    assert HudiWriter.open(path).config.index == IndexConfig()  # nothing recorded by Hudi

    w = HudiWriter.open(path, options=tg.SMALL, index=IndexConfig(IndexType.BUCKET, BUCKETS))
    ours = pa.concat_tables([_rows(list(range(50, 80)), "sf", 3, "o"), _rows(list(range(100, 110)), "berlin", 3, "o")])
    w.upsert(ours)
    model.apply(ours)
    gone = _rows(list(range(0, 6)), "nyc", 4, "")
    w.delete(gone)
    model.apply(deletes=gone)
    after_ours = _groups(path)
    assert all(after_ours[b] == fid for b, fid in hudi_groups.items()), "we left Hudi's file groups"
    _assert_layout(path, model)

    h10 = _rows(list(range(100, 120)), "berlin", 5, "h10")
    read15, = _run(hudi015, [hudi015.read_request(path)])
    read10, _ = _run(hudi10, [hudi10.read_request(path), _write_req(hudi10, path, h10, {**HUDI_BUCKET, **V6})])
    assert _canon(read15) == model.snapshot() and _canon(read10) == model.snapshot()
    model.apply(h10)
    assert all(_groups(path)[b] == fid for b, fid in after_ours.items()), "Hudi 1.0 left our groups"
    _assert_layout(path, model)
    assert tg.read_hudi_rs(path) == model.snapshot()
