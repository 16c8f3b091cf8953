"""The machine's busyness as the model worker's parent measures it: a real process keeps a CPU busy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from needle_action.providers.local_worker import others_busy


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


def test_others_busy_leaves_out_needles_own_children():
    # the render and builder workers building the next trials are needle's own work
    spin = "import time\nend = time.time() + 5\nwhile time.time() < end: pass"
    child = subprocess.Popen([sys.executable, "-c", spin])
    try:
        time.sleep(0.3)
        assert others_busy(0.5) < 0.9  # the child's whole CPU is not counted (0.9: a shared machine)
    finally:
        child.kill()
        child.wait()
