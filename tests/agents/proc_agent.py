"""A stand-in agent for the process tests: it starts tools, ignores signals, holds pipes, floods stderr.

It prints one JSON line to stdout once everything it started is ready (signal dispositions set, pids known),
so a test never has to guess with a sleep: ``{"pid", "pgid", "children", "zombie", "escaped", "argv"}``.
Every process it starts ends by itself after ``LIFETIME`` seconds, so a broken test run leaves nothing
behind for long.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

LIFETIME = 60.0
ZOMBIES: list[subprocess.Popen[bytes]] = []

# A tool the agent started: sets its SIGTERM disposition, says so, then idles.
TOOL = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[1] == "stubborn" else signal.SIG_DFL)
os.write(1, b"ready\\n")
os.close(1)
time.sleep(float(sys.argv[2]))
"""

# The pattern the stderr flood repeats; 251 is prime, so no power-of-two window lines up with it.
PATTERN = bytes(range(251))


def start_tool(kind: str, *, hold: tuple[int, ...] = (), new_session: bool = False) -> int:
    tool = subprocess.Popen(
        [sys.executable, "-c", TOOL, kind, str(LIFETIME)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        pass_fds=hold,
        start_new_session=new_session,
    )
    assert tool.stdout is not None
    assert tool.stdout.readline() == b"ready\n"
    tool.stdout.close()
    return tool.pid


def flood_stderr(size: int) -> None:
    chunk = PATTERN * (65536 // len(PATTERN))
    data = (chunk * (size // len(chunk) + 1))[:size]
    view = memoryview(data)
    while view:
        view = view[os.write(2, view) :]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ignore-term", action="store_true", help="the agent ignores SIGTERM")
    parser.add_argument("--children", type=int, default=0, help="tools that die on SIGTERM")
    parser.add_argument("--stubborn-children", type=int, default=0, help="tools that ignore SIGTERM")
    parser.add_argument("--hold-output", action="store_true", help="the tools keep our stdout and stderr")
    parser.add_argument("--zombie", action="store_true", help="start a tool that exits and is never reaped")
    parser.add_argument("--escape", action="store_true", help="start a tool in a session of its own")
    parser.add_argument("--stderr-bytes", type=int, default=0, help="write this much to stderr, then exit")
    parser.add_argument("--echo", action="store_true", help="echo stdin to stdout until EOF, then exit")
    parser.add_argument("--exit-on-eof", action="store_true", help="read stdin until EOF, then exit")
    parser.add_argument("--exit", action="store_true", help="exit right after the report")
    args, extra = parser.parse_known_args()

    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    hold = (os.dup(1), os.dup(2)) if args.hold_output else ()
    children = [start_tool("plain", hold=hold) for _ in range(args.children)]
    children += [start_tool("stubborn", hold=hold) for _ in range(args.stubborn_children)]
    for fd in hold:
        os.close(fd)
    zombie = None
    if args.zombie:
        # Never waited for (and kept referenced, so no later Popen reaps it): once it exits it stays a zombie
        # in our group for as long as we live.
        ZOMBIES.append(subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.DEVNULL))
        zombie = ZOMBIES[-1].pid
    escaped = None
    if args.escape:
        escaped = start_tool("plain", hold=(os.dup(1), os.dup(2)), new_session=True)

    report = {
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "children": children,
        "zombie": zombie,
        "escaped": escaped,
        "argv": extra,
    }
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()

    if args.stderr_bytes:
        flood_stderr(args.stderr_bytes)
    elif args.echo:
        for line in sys.stdin.buffer:
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
    elif args.exit_on_eof:
        sys.stdin.buffer.read()
    elif not args.exit:
        time.sleep(LIFETIME)  # an agent that keeps running after stdin closes
    # Like a careless agent, leave the tools behind: no waiting, no cleanup at exit.
    os._exit(0)


if __name__ == "__main__":
    main()
