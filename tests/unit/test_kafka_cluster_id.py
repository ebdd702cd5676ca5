"""The local broker's KRaft cluster id never starts with '-' (the storage tool would take
it for an option: a whole test session's broker failed to start on 1 id in 64)."""

from __future__ import annotations

import base64
import uuid

from streamer.local import kafka


def test_a_drawn_cluster_id_never_starts_with_a_dash(monkeypatch):
    dash_first = uuid.UUID(bytes=base64.urlsafe_b64decode("-" + "A" * 21 + "=="))
    draws = iter([dash_first, uuid.UUID(int=7)])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(draws))
    cid = kafka._random_cluster_id()
    assert not cid.startswith("-") and len(cid) == 22
    assert cid == base64.urlsafe_b64encode(uuid.UUID(int=7).bytes).decode().rstrip("=")


def test_cluster_ids_are_kraft_ids():
    ids = [kafka._random_cluster_id() for _ in range(2000)]  # ~31 would start with '-' unchecked
    assert all(len(c) == 22 and not c.startswith("-") for c in ids) and len(set(ids)) == len(ids)
