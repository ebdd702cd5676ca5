"""The process cache of base-file facts: keyed by the file's version, bounded in bytes."""

from __future__ import annotations

from streamer.index.footer_cache import FooterCache


def test_hits_misses_versions_and_eviction():
    c = FooterCache(max_bytes=1000)
    loads = []

    def load(v, n):
        def f():
            loads.append(v)
            return v, n
        return f

    assert c.get_or_load("footer", "/a", 10, 1, load("a1", 200)) == "a1"
    assert c.get_or_load("footer", "/a", 10, 1, load("again", 200)) == "a1"  # cached
    assert c.get_or_load("footer", "/a", 10, 2, load("a2", 200)) == "a2"  # rewritten: new entry
    assert c.get_or_load("footer", "/a", 0, 0, load("unknown", 10)) == "unknown"  # not kept
    assert c.get_or_load("footer", "/a", 0, 0, load("unknown2", 10)) == "unknown2"
    assert c.get_or_load("footer", "/big", 10, 1, load("big", 600)) == "big"  # > max/4: not kept
    assert (c.hits, c.nbytes) == (1, 400)
    for i in range(5):  # 5 x 200 bytes more: the oldest go first
        c.get_or_load("keys", f"/f{i}", 10, 1, load(f"f{i}", 200))
    assert c.nbytes <= 1000
    assert c.get_or_load("footer", "/a", 10, 1, load("reloaded", 200)) == "reloaded"
    assert loads == ["a1", "a2", "unknown", "unknown2", "big", "f0", "f1", "f2", "f3", "f4", "reloaded"]


def test_peek_never_loads():
    c = FooterCache(max_bytes=1000)
    assert c.peek("keys", "/a", 10, 1) is None
    c.get_or_load("keys", "/a", 10, 1, lambda: ("k", 10))
    assert c.peek("keys", "/a", 10, 1) == "k"
    assert c.peek("keys", "/a", 11, 1) is None  # another version of the file
    assert (c.hits, c.misses) == (1, 1)
