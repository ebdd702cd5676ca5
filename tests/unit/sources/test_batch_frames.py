"""A batch's ``df``/``errors``/``cached`` may be made on first use (``Frames``): never
made for a reader that does not ask, made once for every copy of the batch, and a batch
whose frames were never made has nothing to release."""

from __future__ import annotations

import dataclasses

import pytest

from streamer.sources.base import Batch, Frames
from streamer.sources.position import KafkaOffsets


class FakeFrame:
    def __init__(self, name: str) -> None:
        self.name, self.is_cached, self.unpersisted = name, False, 0

    def cache(self):
        self.is_cached = True
        return self

    def unpersist(self):
        self.is_cached, self.unpersisted = False, self.unpersisted + 1
        return self


def _positions():
    return KafkaOffsets(topic="t", partitions={0: 0}), KafkaOffsets(topic="t", partitions={0: 5})


def test_frames_are_made_on_first_use_once_for_every_copy():
    made = []

    def build():
        made.append(1)
        return FakeFrame("good"), FakeFrame("bad"), (FakeFrame("shared"),)

    start, end = _positions()
    batch = Batch(start=start, end=end, frames=Frames(build))
    copy = dataclasses.replace(batch, together=None)
    batch.release()  # nothing made yet: nothing to release, and nothing is made for it
    assert made == [] and not batch.frames.built
    assert copy.df.name == "good" and batch.errors.name == "bad"
    assert made == [1] and batch.cached is copy.cached
    batch.cache()
    assert copy.cached[0].is_cached
    copy.release()
    assert batch.cached[0].unpersisted == 1 and not batch.cached[0].is_cached


def test_a_batch_takes_frames_or_dataframes_not_both():
    start, end = _positions()
    eager = Batch(FakeFrame("good"), FakeFrame("bad"), start=start, end=end)
    assert eager.frames.built and eager.cached == ()
    with pytest.raises(TypeError, match="df and errors"):
        Batch(FakeFrame("good"), start=start, end=end)
    with pytest.raises(TypeError, match="not both"):
        Batch(FakeFrame("good"), FakeFrame("bad"), start=start, end=end, frames=Frames.of(FakeFrame("x"), FakeFrame("y")))
