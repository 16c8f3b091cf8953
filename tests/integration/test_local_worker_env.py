"""The machine's busyness as the model worker's parent measures it: a real process keeps a CPU busy."""

from __future__ import annotations

import subprocess
import sys
import time

from needle_action.providers.local_worker import others_busy


def test_others_busy_sees_another_busy_process():
    spin = "import time\nend = time.time() + 5\nwhile time.time() < end: pass"
    hog = subprocess.Popen([sys.executable, "-c", spin])
    try:
        time.sleep(0.3)
        # the hog alone would take a whole CPU; 0.3 leaves room for a machine shared with tests
        assert others_busy(0.5) > 0.3
    finally:
        hog.kill()
        hog.wait()
