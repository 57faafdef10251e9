"""A CPU load with a duty cycle: spins for DUTY * PERIOD seconds of its own CPU time, sleeps for the rest of
PERIOD, forever. Started by the history scripts on the core a run is pinned to (`history_real/common.sh`).

Usage: busy.py DUTY PERIOD_S     (DUTY 1 spins without sleeping)
"""

import sys
import time

duty, period = float(sys.argv[1]), float(sys.argv[2])
spin, rest = duty * period, (1.0 - duty) * period
while True:
    end = time.thread_time() + spin
    while time.thread_time() < end:
        pass
    if rest > 0:
        time.sleep(rest)
