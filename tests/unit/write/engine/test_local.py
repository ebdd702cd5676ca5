"""The local engine's task runner and grouping: every item once, results in order, the
calling thread one of the workers, and a failure stops new work and surfaces."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from streamer.write.engine.local import run_tasks, task_groups


def test_results_come_back_in_item_order_on_every_parallelism():
    items = list(range(23))
    for parallelism in (1, 2, 3, 8, 40):
        assert run_tasks(lambda i: i * i, items, parallelism) == [i * i for i in items]
    assert run_tasks(lambda i: i, [], 4) == []


def test_the_calling_thread_works_beside_the_helpers():
    seen: list[str] = []
    lock = threading.Lock()
    gate = threading.Barrier(2, timeout=10)

    def fn(i: int) -> int:
        with lock:
            seen.append(threading.current_thread().name)
        if i < 2:
            gate.wait()  # the first two items run at the same time, on two threads
        return i

    assert run_tasks(fn, list(range(6)), 2) == list(range(6))
    assert threading.current_thread().name in seen
    assert any(name.startswith("fg-writer") for name in seen)


def test_a_failure_stops_new_items_and_is_raised_after_the_running_ones_end():
    started: list[int] = []
    finished: list[int] = []
    lock = threading.Lock()

    def fn(i: int) -> int:
        with lock:
            started.append(i)
        if i == 1:
            raise ValueError("item 1 is bad")
        time.sleep(0.01)
        with lock:
            finished.append(i)
        return i

    with pytest.raises(ValueError, match="item 1 is bad"):
        run_tasks(fn, list(range(50)), 2)
    assert len(started) < 50  # no new item after the failure
    assert sorted(finished) == sorted(i for i in started if i != 1)  # nothing left half-run


def test_task_groups_keep_arrival_order_inside_each_task():
    tids = np.array([3, 1, 3, 0, 1, 3], dtype=np.int32)
    groups = task_groups(tids)
    assert [t for t, _ in groups] == [0, 1, 3]
    assert [idx.tolist() for _, idx in groups] == [[3], [1, 4], [0, 2, 5]]
    assert task_groups(np.array([], dtype=np.int32)) == []
