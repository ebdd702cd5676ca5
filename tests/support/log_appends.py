"""Log files with several appends, as a writer that appends to a log (Hudi's, on HDFS)
leaves them: this project writes a new log file per write and never appends, but reads
what appending writers wrote, torn last blocks included."""

from __future__ import annotations

from streamer.fs import FileSystem


def append_blocks(fs: FileSystem, path: str, blocks: list[bytes]) -> None:
    """``blocks`` at the end of the local log ``path`` (created if absent)."""
    assert fs.is_local, "appending is only made up on a local file system here"
    with open(path, "ab") as f:
        f.write(b"".join(blocks))
