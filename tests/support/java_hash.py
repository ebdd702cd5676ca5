"""Hadoop's MurmurHash and Hudi's bloom bit positions, in plain scalar Python.

An independent transliteration of Java int arithmetic (signed bytes, truncating ``%``),
to check :mod:`streamer.table.bloom`'s vectorised hashing against.
"""

from __future__ import annotations


def to_i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def java_murmur(data: bytes, seed: int) -> int:
    """Scalar transliteration of Java int arithmetic, as an independent check."""
    m = 0x5BD1E995
    length = len(data)
    h = to_i32(seed ^ length)
    sb = [b - 256 if b > 127 else b for b in data]  # Java bytes are signed
    for i in range(length >> 2):
        k = (sb[4 * i + 3] << 24) | ((sb[4 * i + 2] & 0xFF) << 16) | ((sb[4 * i + 1] & 0xFF) << 8) | (sb[4 * i] & 0xFF)
        k = to_i32(k * m)
        k = to_i32(k ^ ((k & 0xFFFFFFFF) >> 24))
        k = to_i32(k * m)
        h = to_i32(h * m)
        h = to_i32(h ^ k)
    left = length & 3
    if left:
        if left >= 3:
            h = to_i32(h ^ (sb[length - 3] << 16))
        if left >= 2:
            h = to_i32(h ^ (sb[length - 2] << 8))
        h = to_i32(h ^ sb[length - 1])
        h = to_i32(h * m)
    h = to_i32(h ^ ((h & 0xFFFFFFFF) >> 13))
    h = to_i32(h * m)
    h = to_i32(h ^ ((h & 0xFFFFFFFF) >> 15))
    return h


def java_positions(key: str, nb_hash: int, vsize: int) -> list[int]:
    out, h = [], 0
    for _ in range(nb_hash):
        h = java_murmur(key.encode("utf-8"), h)
        r = abs(h) % vsize  # Java: abs(h % v) == abs(h) % v for truncating %
        out.append(r)
    return out
