"""The machine's busyness as the model worker's parent measures it: a real process keeps a CPU busy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from needle_action.providers.local_worker import _family_ticks, others_busy


def test_others_busy_sees_another_busy_process():
    # a neighbour, not our child: the shell that starts it exits at once, so it is reparented
    spin = "import time\nend = time.time() + 5\nwhile time.time() < end: pass"
    started = subprocess.run(
        ["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!', spin],
        capture_output=True,
        text=True,
        check=True,
    )
    neighbour = int(started.stdout.strip())
    try:
        time.sleep(0.3)
        # the neighbour alone would take a whole CPU; 0.3 leaves room for a machine shared with tests
        assert others_busy(0.5) > 0.3
    finally:
        os.kill(neighbour, signal.SIGKILL)


def test_needles_own_children_are_family_and_a_neighbour_is_not():
    # the render and builder workers building the next trials are needle's own work: others_busy
    # takes the family's ticks out of the machine's
    spin = "import time\nend = time.time() + 5\nwhile time.time() < end: pass"
    child = subprocess.Popen([sys.executable, "-c", spin])
    started = subprocess.run(
        ["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!', spin],
        capture_output=True,
        text=True,
        check=True,
    )
    neighbour = int(started.stdout.strip())
    try:
        time.sleep(0.5)
        family = _family_ticks()
        assert os.getpid() in family
        assert child.pid in family
        assert family[child.pid] > 0  # it has been spinning
        assert neighbour not in family
    finally:
        child.kill()
        child.wait()
        os.kill(neighbour, signal.SIGKILL)
