"""The machine's busyness as the model worker's parent measures it: real processes keep CPUs busy."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from needle_action.providers.local.worker import _family_ticks, others_busy

SPIN = "import time\nend = time.time() + 5\nwhile time.time() < end: pass"


@contextlib.contextmanager
def neighbour() -> Iterator[int]:
    """A process spinning on a CPU that is not our child: the shell that starts it exits at once,
    so it is reparented. Yields its pid."""
    started = subprocess.run(
        ["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!', SPIN],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(started.stdout.strip())
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)


def test_others_busy_sees_another_busy_process():
    with neighbour():
        time.sleep(0.3)
        # the neighbour alone would take a whole CPU; 0.3 leaves room for a machine shared with tests
        assert others_busy(0.5) > 0.3


def test_needles_own_children_are_family_and_a_neighbour_is_not():
    # the render and builder workers building the next trials are needle's own work: others_busy
    # takes the family's ticks out of the machine's
    child = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        with neighbour() as other:
            time.sleep(0.5)
            family = _family_ticks()
            assert os.getpid() in family
            assert child.pid in family
            assert family[child.pid] > 0  # it has been spinning
            assert other not in family
    finally:
        child.kill()
        child.wait()
