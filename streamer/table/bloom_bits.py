"""Bloom filter bit vectors: packed in memory, or left in the footer's base64 until used.

Why lazy: a Hudi base file's footer carries its bloom filter as base64 text (~860 KB for
a 125,000-row file at Hudi's default false-positive rate), and decoding all of it took
~4 ms per file - a sixth of a cold 100k-record upsert into a 10M-row table, whose probes
then read ~30,000 of the filter's ~650,000 bytes (benchmarks/RESULTS.md). A
parsed footer filter therefore keeps the text and decodes only the bytes a probe reads;
once its probes have read a quarter as many bytes as the whole vector holds (a long-running
pipeline probing the same cached filter batch after batch), it decodes everything once
and continues packed.
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from types import EllipsisType

import numpy as np
import numpy.typing as npt

#: The standard base64 alphabet (RFC 4648), the one Java's ``Base64.getEncoder`` uses.
ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_LUT = np.zeros(256, dtype=np.uint16)
_LUT[np.frombuffer(ALPHABET, dtype=np.uint8)] = np.arange(64, dtype=np.uint16)

#: What indexes a bit vector, as it indexes a ``bool`` array: a position, positions, a mask, a slice.
BitIndex = int | slice | EllipsisType | np.ndarray | Sequence[int]


class PackedBits:
    """A bit vector kept packed, 8 bits a byte in the serialized layout (bit ``i`` ->
    byte ``i >> 3``, ``1 << (i & 7)``), indexed like the ``bool`` array it stands for.

    Packed, a parsed filter takes an eighth of the memory of one byte per bit, so the
    process's footer cache (:mod:`streamer.index.footer_cache`) holds eight times the
    filters. Tests gather the byte and shift; adds set bits in place.
    """

    __slots__ = ("_packed", "size")

    def __init__(self, size: int, packed: np.ndarray | None = None) -> None:
        self.size = size
        nbytes = (size + 7) // 8
        if packed is None:
            packed = np.zeros(nbytes, dtype=np.uint8)
        elif packed.dtype != np.uint8 or packed.shape != (nbytes,):
            raise ValueError(f"{size} bits need {nbytes} packed bytes, got {packed.shape} {packed.dtype}")
        #: None only in a :class:`LazyBits` not decoded yet (which overrides ``packed``)
        self._packed: np.ndarray | None = packed

    @property
    def packed(self) -> np.ndarray:
        """The packed bytes (uint8), writable in place."""
        packed = self._packed
        if packed is None:
            raise RuntimeError("bit vector without its packed bytes (a LazyBits decodes them)")
        return packed

    def gather(self, byte: np.ndarray) -> np.ndarray:
        """The packed bytes at indices ``byte`` (uint8, known to be in range)."""
        return self.packed[byte]

    @classmethod
    def from_bools(cls, bits: np.ndarray) -> PackedBits:
        bits = np.asarray(bits, dtype=bool)
        return cls(len(bits), np.packbits(bits, bitorder="little"))

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes

    @property
    def held_bytes(self) -> int:
        """Memory this vector may hold, for cache accounting."""
        return self.nbytes

    @property
    def shape(self) -> tuple[int]:
        return (self.size,)

    def unpacked(self) -> np.ndarray:
        """The bits as a new ``bool`` array (one byte per bit)."""
        return np.unpackbits(self.packed, count=self.size, bitorder="little").view(bool)

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        u = self.unpacked()
        return u if dtype is None else u.astype(dtype)

    def _positions(self, idx: npt.ArrayLike) -> np.ndarray:
        pos = np.asarray(idx)
        if pos.dtype.kind not in "iu":
            raise IndexError(f"bit positions must be integers, got {pos.dtype}")
        if pos.dtype.kind == "i" and pos.size and pos.min() < 0:
            pos = np.where(pos < 0, pos + self.size, pos)
        if pos.size and (pos.min() < 0 or pos.max() >= self.size):
            raise IndexError(f"bit position out of range for {self.size} bits")
        return pos

    def test(self, pos: np.ndarray) -> np.ndarray:
        """``bool`` per position (any shape), positions known to be in range."""
        return ((self.gather(pos >> 3) >> (pos & 7).astype(np.uint8)) & 1).view(bool)

    def set(self, pos: np.ndarray) -> None:
        """Set the bits at ``pos`` (positions known to be in range, repeats allowed)."""
        pos = np.asarray(pos).ravel()
        if len(pos) == 0:
            return
        if len(pos) * 8 >= self.size:  # many: one scatter into the unpacked bits is cheaper
            u = np.unpackbits(self.packed, bitorder="little")
            u[pos] = True  # a bool scalar: numpy's scatter of an int 1 into uint8 is ~40% slower
            self.packed[:] = np.packbits(u, bitorder="little")
        else:
            np.bitwise_or.at(self.packed, pos >> 3, np.left_shift(1, pos & 7).astype(np.uint8))

    def __getitem__(self, idx: BitIndex) -> bool | np.ndarray:
        if isinstance(idx, slice) or idx is Ellipsis:
            return self.unpacked()[idx]
        pos = np.asarray(idx)
        if pos.dtype == bool:
            return self.unpacked()[pos]
        out = self.test(self._positions(pos))
        return bool(out) if out.ndim == 0 else out

    def __setitem__(self, idx: BitIndex, value: npt.ArrayLike) -> None:
        v = np.asarray(value)
        if isinstance(idx, slice) or idx is Ellipsis or np.asarray(idx).dtype == bool or v.ndim:
            u = self.unpacked()
            u[idx] = value
            self.packed[:] = np.packbits(u, bitorder="little")
            return
        pos = self._positions(idx)
        if bool(v):
            self.set(pos)
        else:
            pos = pos.ravel()
            np.bitwise_and.at(self.packed, pos >> 3, ~np.left_shift(1, pos & 7).astype(np.uint8))

    def any(self) -> bool:
        return bool(self.packed.any())

    def sum(self) -> int:
        return int(np.unpackbits(self.packed).sum())


class Base64Text:
    """Base64 text whose decoded bytes are read by range or by index, never all at once.

    The alphabet and padding are checked up front (a pass over the text that costs a
    fifth of decoding it), so damaged text is refused when the filter is parsed, as a
    full decode refused it.
    """

    __slots__ = ("_codes", "text", "nbytes")

    def __init__(self, text: bytes) -> None:
        if len(text) % 4:
            raise ValueError(f"base64 text of {len(text)} characters (not a multiple of 4)")
        body = text.rstrip(b"=")
        pad = len(text) - len(body)
        if pad > 2 or body.translate(None, ALPHABET):
            raise ValueError("not base64 text (characters outside the alphabet, or misplaced padding)")
        self.text = text
        self.nbytes = len(text) // 4 * 3 - pad  # the decoded length
        self._codes = np.frombuffer(text, dtype=np.uint8)

    def __len__(self) -> int:
        return self.nbytes

    def range(self, start: int, stop: int) -> bytes:
        """Decoded bytes ``[start, stop)`` (only the 4-character groups holding them)."""
        if not 0 <= start <= stop <= self.nbytes:
            raise ValueError(f"bytes {start}..{stop} are outside the {self.nbytes} decoded bytes")
        if start == stop:
            return b""
        first, last = start // 3, (stop - 1) // 3
        raw = binascii.a2b_base64(self.text[4 * first : 4 * last + 4])
        return raw[start - 3 * first : stop - 3 * first]

    def gather(self, idx: np.ndarray) -> np.ndarray:
        """Decoded bytes at indices ``idx`` (known to be in range), as uint8.

        Byte ``j`` is the 8 bits that start at bit ``2 * (j % 3)`` of character
        ``4 * (j // 3) + j % 3``: that character's low bits and the next one's high bits.
        """
        group, r = np.divmod(idx, 3)
        i = 4 * group + r
        hi = _LUT[self._codes[i]]
        lo = _LUT[self._codes[i + 1]]
        r = r.astype(np.uint16)
        return ((hi << (2 + 2 * r)) | (lo >> (4 - 2 * r))).astype(np.uint8)


class LazyBits(PackedBits):
    """A :class:`PackedBits` still in its base64 text: ``nbytes`` bytes from decoded byte
    ``start`` (see the module docstring for when it decodes them all)."""

    __slots__ = ("_source", "_start", "_read")

    def __init__(self, size: int, source: Base64Text, start: int) -> None:
        nbytes = (size + 7) // 8
        if start + nbytes > len(source):
            raise ValueError("bit vector runs past the end of the filter")
        self.size = size
        self._packed = None
        self._source: Base64Text | None = source
        self._start = start
        self._read = 0

    @property
    def packed(self) -> np.ndarray:
        packed = self._packed
        if packed is None:
            source = self._source
            if source is None:  # another thread decoded it meanwhile (set _packed first)
                return super().packed
            nbytes = (self.size + 7) // 8
            packed = np.frombuffer(source.range(self._start, self._start + nbytes), dtype=np.uint8).copy()
            if self.size & 7:  # the last byte's bits past the vector, cleared as before
                packed[-1] &= np.uint8((1 << (self.size & 7)) - 1)
            self._packed = packed
            self._source = None  # the text is the footer's: not held twice
        return packed

    @property
    def nbytes(self) -> int:
        return (self.size + 7) // 8

    @property
    def held_bytes(self) -> int:
        """Its share of the base64 text until decoded (4 characters per 3 bytes), an
        upper bound of the packed bytes after."""
        return (self.nbytes * 4 + 2) // 3

    def gather(self, byte: np.ndarray) -> np.ndarray:
        source = self._source
        if self._packed is not None or source is None:
            return self.packed[byte]
        byte = np.asarray(byte)
        self._read += byte.size
        if self._read * 4 > self.nbytes:  # probed enough to pay for a full decode
            return self.packed[byte]
        out = np.atleast_1d(source.gather(self._start + byte.astype(np.int64)))
        if self.size & 7:  # padding bits of the last byte read as clear, as when decoded
            last = np.atleast_1d(byte == self.nbytes - 1)
            if last.any():
                out[last] &= np.uint8((1 << (self.size & 7)) - 1)
        return out.reshape(byte.shape)
