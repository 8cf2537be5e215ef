#!/usr/bin/env python3
"""heartbeatd: appends 'beat N' to /app/daemon/var/heartbeat.log every 0.2 s.

It runs in the foreground and does not daemonize or write a pidfile itself. On SIGTERM it
appends 'stopping' and exits with status 0."""
import os
import signal
import sys
import time

LOG = "/app/daemon/var/heartbeat.log"
running = True


def on_term(signum, frame):
    global running
    running = False


def main():
    os.makedirs(os.path.dirname(LOG), exist_ok=True)
    signal.signal(signal.SIGTERM, on_term)
    n = 0
    with open(LOG, "a", buffering=1) as log:
        log.write(f"start pid {os.getpid()}\n")
        while running:
            n += 1
            log.write(f"beat {n}\n")
            time.sleep(0.2)
        log.write("stopping\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
