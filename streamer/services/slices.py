"""What table services need to know about a file slice's log: its blocks as *units*.

A unit is every effective block one instant contributed to the slice (a commit writes a
data block and a delete block; a log compaction may write several blocks). Units are
what log compaction stitches and what ``COMPACTED_BLOCK_TIMES`` names, so planning
reasons in units, in the order the reader applies them (the reader's own
:func:`streamer.table.merge.effective_blocks` decides which blocks count).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from streamer.fs import FileSystem
from streamer.table.fsview import FileSlice
from streamer.table.log_format import BlockType, LogBlock, read_log_file
from streamer.table.merge import ScanStats, effective_blocks


@dataclass
class Unit:
    """The effective blocks of one instant in one slice, in reader order."""

    instant: str
    blocks: list[LogBlock] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(b.size for b in self.blocks)

    @property
    def max_block_size(self) -> int:
        return max((b.size for b in self.blocks), default=0)

    @property
    def is_compacted(self) -> bool:
        return any(b.compacted_block_times for b in self.blocks)


def read_slice_blocks(fs: FileSystem, fslice: FileSlice) -> list[tuple[str, LogBlock]]:
    """All blocks (headers only; content stays lazy) of a slice's logs, in log order."""
    out: list[tuple[str, LogBlock]] = []
    for lf in fslice.log_files:
        if not fs.exists(lf.path):
            continue  # cleaned meanwhile; the slice is no longer the latest
        out.extend((lf.path, b) for b in read_log_file(fs, lf.path, lazy=True))
    return out


def effective_units(
    blocks: list[tuple[str, LogBlock]], completed: Container[str | None]
) -> tuple[list[Unit], ScanStats]:
    """Group the reader's effective blocks by instant, each unit where its first block is.

    All blocks of one instant form one unit (the reader keeps a stitched run's data and
    delete blocks together where the run was), so a unit is replaced as a whole.
    """
    stats = ScanStats()
    units: list[Unit] = []
    by_instant: dict[str, Unit] = {}
    for b in effective_blocks(blocks, completed, stats):
        if b.block_type not in (BlockType.PARQUET_DATA, BlockType.AVRO_DATA, BlockType.DELETE,
                                BlockType.HFILE_DATA):
            continue
        inst = b.instant_time or ""
        unit = by_instant.get(inst)
        if unit is None:
            unit = by_instant[inst] = Unit(inst, [])
            units.append(unit)
        unit.blocks.append(b)
    return units, stats
