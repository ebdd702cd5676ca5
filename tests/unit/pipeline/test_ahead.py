"""The batch read ahead (``streamer.pipeline.ahead``) is handed out only where it starts
at the committed position, and released unwritten otherwise."""

from __future__ import annotations

import pytest

from sources.position import KafkaOffsets
from streamer.pipeline.ahead import ReadAhead


class _Released:
    def __init__(self, has_new_data: bool = True) -> None:
        self.has_new_data = has_new_data
        self.released = 0

    def release(self) -> None:
        self.released += 1


def _at(offset: int) -> KafkaOffsets:
    return KafkaOffsets(topic="t", partitions={0: offset})


def _start(ahead: ReadAhead, start: KafkaOffsets, batch: _Released, prepared: _Released | Exception):
    def prepare(_batch):
        if isinstance(prepared, Exception):
            raise prepared
        return prepared

    ahead.start(start, read=lambda: batch, prepare=prepare)


def test_taken_at_its_start_position():
    ahead, batch, prepared = ReadAhead(), _Released(), _Released()
    _start(ahead, _at(10), batch, prepared)
    got = ahead.take(_at(10))
    assert got is not None and got.batch is batch and got.prepared is prepared
    assert not ahead.pending and batch.released == 0 and prepared.released == 0


@pytest.mark.parametrize("position", [_at(7), None])
def test_released_where_the_committed_position_is_elsewhere(position):
    ahead, batch, prepared = ReadAhead(), _Released(), _Released()
    _start(ahead, _at(10), batch, prepared)
    assert ahead.take(position) is None
    assert (batch.released, prepared.released) == (1, 1)


def test_a_failed_read_or_preparation_leaves_the_batch_to_be_read_again():
    ahead, batch = ReadAhead(), _Released()
    _start(ahead, _at(10), batch, RuntimeError("decode failed"))
    assert ahead.take(_at(10)) is None and batch.released == 1

    def failing_read():
        raise OSError("broker away")

    ahead.start(_at(10), read=failing_read, prepare=lambda b: b)
    assert ahead.take(_at(10)) is None


def test_nothing_new_is_not_handed_out_and_discard_releases():
    ahead, empty = ReadAhead(), _Released(has_new_data=False)
    _start(ahead, _at(10), empty, _Released())
    assert ahead.take(_at(10)) is None and empty.released == 1
    batch, prepared = _Released(), _Released()
    _start(ahead, _at(10), batch, prepared)
    ahead.discard()
    assert not ahead.pending and (batch.released, prepared.released) == (1, 1)
    assert ahead.take(_at(10)) is None  # nothing left
