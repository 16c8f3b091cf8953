"""The render workers' pool (assemble/templates/isolate.py): a second worker starts in the background while
the first serves, so a render waits for whichever is free first, never for a start it can skip."""

from __future__ import annotations

import io
import threading
import time

from needle_action.assemble.templates import isolate
from needle_action.core.pipes import PlainData


def test_a_second_worker_starts_in_the_background_and_is_handed_over_once_it_answers():
    pool = isolate._Pool(2)
    try:
        first = pool.acquire()  # the first worker starts here: there is no other to wait for
        got: list[isolate._Worker] = []
        taker = threading.Thread(target=lambda: got.append(pool.acquire()))
        taker.start()
        taker.join(timeout=60)  # the first stays busy: the taker gets the one started for it
        assert got
        assert got[0] is not first
        assert pool.count == 2
        for worker in (first, got[0]):
            answer = PlainData(io.BytesIO(worker.call(isolate._PING, 10))).load()
            assert answer == ("ok", "")
            pool.release(worker)
        assert len(pool.idle) == 2
        assert pool.acquire() in (first, got[0])  # reused, no third start
        assert pool.count == 2
    finally:
        pool.close()


def test_a_worker_that_cannot_start_in_the_background_gives_its_place_back(monkeypatch):
    pool = isolate._Pool(2)
    try:
        first = pool.acquire()

        def broken() -> None:
            raise OSError("no more processes")

        monkeypatch.setattr(isolate, "_Worker", broken)
        got: list[isolate._Worker] = []
        taker = threading.Thread(target=lambda: got.append(pool.acquire()))
        taker.start()
        deadline = time.monotonic() + 30
        while not pool.start_failed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pool.start_failed
        assert pool.count == 1
        assert not got
        pool.release(first)
        taker.join(timeout=30)
        assert got == [first]
        assert pool.count == 1
    finally:
        pool.close()


def test_prestart_starts_the_rest_of_the_pool_once_a_first_worker_runs():
    pool = isolate._Pool(2)
    try:
        pool.prestart()
        assert pool.count == 0  # nothing runs yet: the first render starts the first worker
        first = pool.acquire()
        pool.prestart()
        assert pool.count == 2
        deadline = time.monotonic() + 60
        while not pool.idle and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(pool.idle) == 1
        assert pool.idle[0] is not first
        pool.release(first)
    finally:
        pool.close()
