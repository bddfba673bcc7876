"""A tool started by the fault agent: it idles, and may ignore SIGTERM, hold the agent's stdout, or escape.

Run as ``python fault_tool.py READY_FD [--ignore-term] [--escape] [--lifetime SECONDS]``. Once it is in the
state asked for (SIGTERM disposition set, session left), it writes its pid and a newline to READY_FD and closes
it, so the agent (and the test) never has to guess with a sleep.

``--escape`` leaves the agent's process group the way daemonising tools do: fork, ``setsid`` in the child,
fork again, and the first two exit; the grandchild, now in a session and a process group of its own and an
orphan, is the one that reports and idles. Without ``--escape`` the tool stays in the agent's group.

Every tool ends by itself after ``--lifetime`` seconds (60 by default), so a failed test leaves nothing behind
for long. The tool's stdout is whatever the agent gave it: the agent's own stdout when it is to hold that pipe.
"""

from __future__ import annotations

import argparse
import os
import signal
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("ready_fd", type=int)
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--escape", action="store_true")
    parser.add_argument("--lifetime", type=float, default=60.0)
    args = parser.parse_args()

    if args.escape:
        if os.fork():
            os._exit(0)  # the tool the agent started exits at once, as a daemonising tool's launcher does
        os.setsid()
        if os.fork():
            os._exit(0)
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.write(args.ready_fd, f"{os.getpid()}\n".encode())
    os.close(args.ready_fd)
    time.sleep(args.lifetime)


if __name__ == "__main__":
    main()
