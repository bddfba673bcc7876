"""One measurement in a process of its own: ``python -m benchmarks.rows ROW --updates N``.

Each row sends the same prompt to a fresh flood agent and times the reply, from writing the prompt to having its
answer: wall time, this process's CPU time (all threads), its peak RSS and its allocated blocks before and after.
It prints one JSON object on stdout, for :mod:`benchmarks.run`. A process per row keeps the peak RSS and the
import costs of one client out of another's figures.

Rows:

* ``client`` / ``async`` — tinyacp's :class:`~tinyacp.Client` / :class:`~tinyacp.AsyncClient`, observer a no-op
  (``client --supervise``: with ``Options(supervise=True)``, and the supervisor's own CPU time during the prompt);
* ``journal`` — ``Client`` with a :class:`~tinyacp.JsonlJournal` recording to a file, as documented: ``sync=False``
  (the default), the journal itself the observer, so the client's flush point writes each read burst at once;
* ``sdk`` — the official ACP SDK's client side (``acp.spawn_agent_process``), ``session_update`` a no-op;
* ``decode`` — a bare loop: ``readline`` and the typed msgspec decoder tinyacp uses for updates;
* ``json`` — the same loop with the standard library's ``json.loads``, the figure the benchmark's issue quotes;
* ``read`` — a bare loop that only reads the lines;
* ``pipe`` — reads the agent's output in 1 MiB ``os.read`` calls without splitting it: the flood agent's own rate.

And the cost of many clients, each with an agent of the smallest kind (:file:`tiny_agent.sh`, a POSIX shell loop):

* ``idle`` — ``--clients K`` clients (``--async``: ``AsyncClient``) after ``initialize``: how much each adds to
  this process's RSS, and how many fds it holds;
* ``many`` — ``--clients N`` ``AsyncClient`` instances in one process, each doing one turn (initialize, new session, a
  prompt answered with one chunk), all at once: the time until every turn is done, and the peak RSS.

And two that time the edges of a client's life instead of a flood:

* ``initialize`` — from ``Client(options)`` to a finished ``initialize`` against the demo agent (with
  ``--supervise``, also the supervisor's resident memory);
* ``teardown`` — ``close()`` of an agent that started sleeping grandchildren, some of which ignore SIGTERM, and
  some of which may have left its process group (``--escaped``; only ``--supervise`` stops those).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from benchmarks.flood_agent import TEXT, update_line

HERE = Path(__file__).resolve().parent
FLOOD_AGENT = HERE / "flood_agent.py"
TINY_AGENT = ["/bin/sh", str(HERE / "tiny_agent.sh")]
TEXT_BYTES = len(TEXT.encode())
MiB = 1 << 20
PROMPT = "flood"
ROW_GRACE = 600.0
"""Seconds a prompt past its reply limit waits for the flood to end (the client enforces it under any flood)."""

ROWS = ("client", "async", "journal", "sdk", "decode", "json", "read", "pipe", "idle", "many", "initialize", "teardown")


def flood_command(updates: int, *extra: str) -> list[str]:
    return [sys.executable, str(FLOOD_AGENT), "--updates", str(updates), *extra]


def rss_now_kib() -> int:
    """The current resident set size (``VmRSS``), in KiB."""
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


class Clock:
    """Wall time, CPU time and allocated blocks between :meth:`start` and :meth:`stop`."""

    def start(self) -> None:
        self.rss_before = rss_now_kib()
        self.blocks_before = sys.getallocatedblocks()
        self.cpu0 = time.process_time()
        self.wall0 = time.perf_counter()

    def stop(self) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0
        self.blocks_after = sys.getallocatedblocks()

    def report(self, updates: int, **extra: Any) -> dict[str, Any]:
        return {
            "updates": updates,
            "wall": self.wall,
            "cpu": self.cpu,
            "rss_before_kib": self.rss_before,
            "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "blocks_retained": self.blocks_after - self.blocks_before,
            **extra,
        }


# ------------------------------------------------------------------------------------------------------------------
# tinyacp


def tinyacp_options(updates: int, reply_limit: int | None, observer: Any) -> Any:
    import tinyacp

    if reply_limit is None:  # keep the whole reply
        limits = tinyacp.TransferLimits(
            max_reply_bytes=max(updates * TEXT_BYTES, 1) + MiB,
            max_reply_chunks=max(updates, tinyacp.TransferLimits().max_reply_chunks),
        )
    else:
        limits = tinyacp.TransferLimits(max_reply_bytes=reply_limit)
    # The flood agent ignores session/cancel and sends every update: give it the time to, past the reply limit.
    return tinyacp.Options(
        command=flood_command(updates), observer=observer, transfer_limits=limits, cancel_grace=ROW_GRACE
    )


def check_reply(result: Any, updates: int, reply_limit: int | None) -> dict[str, Any]:
    if result.chunk_count != updates:
        raise AssertionError(f"{result.chunk_count} chunks arrived, {updates} were sent")
    if reply_limit is None and (result.overflow is not None or len(result.text) != updates * TEXT_BYTES):
        raise AssertionError("the whole reply should have been kept")
    if reply_limit is not None and updates * TEXT_BYTES > reply_limit and result.overflow is None:
        raise AssertionError("the reply limit should have been reached")
    return {"kept_bytes": len(result.text), "overflow": result.overflow is not None}


def run_client(updates: int, reply_limit: int | None, journal: bool, supervise: bool = False) -> dict[str, Any]:
    import tinyacp

    with tempfile.TemporaryDirectory() as tmp:
        options = tinyacp_options(updates, reply_limit, tinyacp.BaseObserver())
        options = dataclasses.replace(options, supervise=supervise)
        journal_path = Path(tmp) / "journal.jsonl"
        if journal:
            observer = tinyacp.JsonlJournal(journal_path)
            options = dataclasses.replace(options, observer=observer, epoch=observer.begin_epoch())
        clock = Clock()
        with tinyacp.Client(options) as client:
            client.initialize()
            session = client.new_session(tmp)
            cpu_before = cpu_seconds(client.pid) if supervise else 0.0
            clock.start()
            result = client.prompt(session.id, PROMPT)
            clock.stop()
            cpu_after = cpu_seconds(client.pid) if supervise else 0.0
        extra = check_reply(result, updates, reply_limit)
        if supervise:  # client.pid is the supervisor's
            extra["supervisor_cpu"] = cpu_after - cpu_before
        if journal:
            observer.close()
            extra["journal_bytes"] = journal_path.stat().st_size
    return clock.report(updates, **extra)


def run_async_client(updates: int, reply_limit: int | None) -> dict[str, Any]:
    import tinyacp

    async def main() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            clock = Clock()
            async with tinyacp.AsyncClient(tinyacp_options(updates, reply_limit, tinyacp.BaseObserver())) as client:
                await client.initialize()
                session = await client.new_session(tmp)
                clock.start()
                result = await client.prompt(session.id, PROMPT)
                clock.stop()
            return clock.report(updates, **check_reply(result, updates, reply_limit))

    return asyncio.run(main())


# ------------------------------------------------------------------------------------------------------------------
# The official SDK


def run_sdk(updates: int) -> dict[str, Any]:
    import acp
    from acp.schema import ClientCapabilities

    class NoopClient:
        """The SDK's client side with nothing to do but count (the count checks the run, after it)."""

        def __init__(self) -> None:
            self.updates = 0

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            self.updates += 1

        async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
            raise acp.RequestError.method_not_found("session/request_permission")

    noop = NoopClient()

    async def main() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            command = flood_command(updates)
            client = cast(acp.Client, noop)  # the SDK's Protocol lists every method; a no-op needs two
            async with acp.spawn_agent_process(client, command[0], *command[1:]) as (conn, _process):
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
                session = await conn.new_session(cwd=tmp, mcp_servers=[])
                clock = Clock()
                clock.start()
                response = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block(PROMPT)])
                clock.stop()
        if noop.updates != updates or response.stop_reason != "end_turn":
            raise AssertionError(f"the SDK saw {noop.updates} of {updates} updates ({response.stop_reason})")
        return clock.report(updates)

    return asyncio.run(main())


# ------------------------------------------------------------------------------------------------------------------
# Bare loops


def handshake(proc: subprocess.Popen[bytes]) -> str:
    """initialize and session/new by hand; returns the session id."""
    assert proc.stdin is not None and proc.stdout is not None
    requests: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}},
    ]
    answer: dict[str, Any] = {}
    for request in requests:
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
    return str(answer["result"]["sessionId"])


def send_prompt(proc: subprocess.Popen[bytes], session_id: str) -> None:
    assert proc.stdin is not None
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": PROMPT}]}
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": params}).encode())
    proc.stdin.write(b"\n")
    proc.stdin.flush()


def run_bare(updates: int, kind: str) -> dict[str, Any]:
    # A 64 KiB buffer (one pipe's worth) rather than io's 8 KiB default: the strongest plain readline loop.
    proc = subprocess.Popen(flood_command(updates), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=64 * 1024)
    assert proc.stdout is not None and proc.stdin is not None
    try:
        session_id = handshake(proc)
        readline = proc.stdout.readline
        clock = Clock()
        if kind == "pipe":
            fd = proc.stdout.fileno()
            expected = updates * len(update_line(session_id)) + len(b'{"jsonrpc":"2.0","id":2,"result":')
            received = 0
            clock.start()
            send_prompt(proc, session_id)
            while received < expected:
                chunk = os.read(fd, MiB)
                if not chunk:
                    raise AssertionError("the flood agent stopped early")
                received += len(chunk)
            clock.stop()
        elif kind in ("decode", "json"):
            decode = _update_decoder() if kind == "decode" else json.loads
            clock.start()
            send_prompt(proc, session_id)
            for _ in range(updates):
                decode(readline())
            last = readline()
            clock.stop()
            _check_last(last)
        else:
            clock.start()
            send_prompt(proc, session_id)
            for _ in range(updates):
                readline()
            last = readline()
            clock.stop()
            _check_last(last)
    finally:
        proc.stdin.close()
        proc.stdout.close()
        proc.wait(10)
    return clock.report(updates)


def _update_decoder() -> Callable[[bytes], Any]:
    """The decoder tinyacp's core uses for ``session/update`` lines, built the same way."""
    import msgspec

    from tinyacp._messages import UpdateLine

    return msgspec.json.Decoder(UpdateLine).decode


def _check_last(line: bytes) -> None:
    if b'"stopReason"' not in line:
        raise AssertionError(f"expected the prompt's answer, got {line[:200]!r}")


# ------------------------------------------------------------------------------------------------------------------
# Many clients


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def nofile() -> list[int]:
    return list(resource.getrlimit(resource.RLIMIT_NOFILE))


def run_idle(clients: int, use_async: bool) -> dict[str, Any]:
    """RSS and fds that ``clients`` initialized clients add, measured after a first client warmed every path."""
    import gc

    import tinyacp

    options = tinyacp.Options(command=TINY_AGENT, observer=tinyacp.BaseObserver())

    async def start_async(count: int) -> list[Any]:
        started = [tinyacp.AsyncClient(options) for _ in range(count)]
        await asyncio.gather(*(client.initialize() for client in started))
        return started

    async def close_async(started: list[Any]) -> None:
        await asyncio.gather(*(client.close() for client in started))

    def start_sync(count: int) -> list[Any]:
        started = [tinyacp.Client(options) for _ in range(count)]
        for client in started:
            client.initialize()
        return started

    loop = asyncio.new_event_loop() if use_async else None

    def start(count: int) -> list[Any]:
        return loop.run_until_complete(start_async(count)) if loop is not None else start_sync(count)

    warm = start(1)
    gc.collect()
    rss_before, fds_before = rss_now_kib(), open_fds()
    started = start(clients)
    gc.collect()
    rss_after, fds_after = rss_now_kib(), open_fds()
    everyone = warm + started
    if loop is not None:
        loop.run_until_complete(close_async(everyone))
        loop.close()
    else:
        for client in everyone:
            client.close()
    return {
        "clients": clients,
        "rss_per_client_kib": (rss_after - rss_before) / clients,
        "fds_per_client": (fds_after - fds_before) / clients,
    }


def run_many(clients: int) -> dict[str, Any]:
    """``clients`` AsyncClients, one turn each, all at once; the wall time until every turn is done."""
    import tinyacp

    options = tinyacp.Options(command=TINY_AGENT, observer=tinyacp.BaseObserver())
    limit_before = nofile()

    async def turn(client: Any, cwd: str) -> str:
        await client.initialize()
        session = await client.new_session(cwd)
        return str((await client.prompt(session.id, "hi")).text)

    async def main() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            rss_before = rss_now_kib()
            start = time.perf_counter()
            started = [tinyacp.AsyncClient(options) for _ in range(clients)]
            spawned = time.perf_counter() - start
            fds = open_fds()
            replies = await asyncio.gather(*(turn(client, tmp) for client in started))
            wall = time.perf_counter() - start
            close_start = time.perf_counter()
            await asyncio.gather(*(client.close() for client in started))
            closed = time.perf_counter() - close_start
        if replies != ["hi"] * clients:
            raise AssertionError(f"{sum(reply == 'hi' for reply in replies)} of {clients} turns answered")
        return {
            "clients": clients,
            "wall": wall,
            "spawn": spawned,
            "close": closed,
            "rss_before_kib": rss_before,
            "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "fds_while_running": fds,
            "nofile_before": limit_before,
            "nofile_after": nofile(),
        }

    return asyncio.run(main())


# ------------------------------------------------------------------------------------------------------------------
# The edges of a client's life


def run_initialize(supervise: bool) -> dict[str, Any]:
    import tinyacp

    options = tinyacp.Options(
        command=[sys.executable, "-m", "tinyacp.demo"], supervise=supervise, observer=tinyacp.BaseObserver()
    )
    start = time.perf_counter()
    client = tinyacp.Client(options)
    try:
        client.initialize()
        seconds = time.perf_counter() - start
        memory = memory_kib(client.pid) if supervise else {}  # client.pid is the supervisor's
    finally:
        client.close()
    return {"seconds": seconds, **memory}


def run_teardown(grandchildren: int, stubborn: int, kill_grace: float, supervise: bool, escaped: int) -> dict[str, Any]:
    import tinyacp

    with tempfile.TemporaryDirectory() as tmp:
        pid_file = Path(tmp) / "escaped.pids"
        extra = ["--grandchildren", str(grandchildren), "--stubborn", str(stubborn)]
        if escaped:
            extra += ["--escaped", str(escaped), "--pid-file", str(pid_file)]
        options = tinyacp.Options(
            command=flood_command(0, *extra),
            kill_grace=kill_grace,
            supervise=supervise,
            observer=tinyacp.BaseObserver(),
        )
        client = tinyacp.Client(options)
        try:
            client.initialize()  # answered once every grandchild runs and the escaped ones' pids are written
            pgid = client.pid
            outside = [int(pid) for pid in pid_file.read_text().split()] if escaped else []
            before = len(live_group_members(pgid)) + len(live(outside))
        except BaseException:
            client.close()
            kill_escaped(pid_file)
            raise
        start = time.perf_counter()
        client.close()
        seconds = time.perf_counter() - start
        left_outside = live(outside)
        left = len(live_group_members(pgid)) + len(left_outside)
        kill_escaped(pid_file)  # what the client left behind is no business of the next row
    return {
        "seconds": seconds,
        "kill_grace": kill_grace,
        "members_before": before,
        "left": left,
        "escaped_left": len(left_outside),
    }


def kill_escaped(pid_file: Path) -> None:
    """SIGKILL the escaped sleepers still alive (they never fork again, so a pid is theirs while it lives)."""
    try:
        pids = [int(pid) for pid in pid_file.read_text().split()]
    except FileNotFoundError:
        return
    for pid in live(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def live(pids: list[int]) -> list[int]:
    """Those of ``pids`` that are live processes (not zombies)."""
    return [pid for pid in pids if (state := proc_stat(pid)) is not None and state[0] != b"Z"]


def proc_stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state first), None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    return data[data.rindex(b")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) of process ``pid`` so far, in clock ticks' resolution (10 ms here)."""
    fields = proc_stat(pid)
    if fields is None:
        raise RuntimeError(f"process {pid} is gone")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid: int) -> dict[str, int]:
    """Resident and proportional set size of process ``pid``, in KiB (PSS shares pages with their other users)."""
    memory = {}
    with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
        for line in rollup:
            name, _, rest = line.partition(b":")
            if name in (b"Rss", b"Pss", b"Private_Clean", b"Private_Dirty"):
                memory[name.decode().lower() + "_kib"] = int(rest.split()[0])
    return {
        "rss_kib": memory["rss_kib"],
        "pss_kib": memory["pss_kib"],
        "private_kib": memory["private_clean_kib"] + memory["private_dirty_kib"],
    }


def live_group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = proc_stat(int(entry))
        if fields is not None and int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(int(entry))
    return members


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("row", choices=ROWS)
    parser.add_argument("--updates", type=int, default=0)
    parser.add_argument("--reply-limit", type=int, default=None, help="max_reply_bytes (tinyacp rows only)")
    parser.add_argument("--grandchildren", type=int, default=20, help="teardown: sleepers the agent starts")
    parser.add_argument("--stubborn", type=int, default=1, help="teardown: how many of them ignore SIGTERM")
    parser.add_argument("--kill-grace", type=float, default=2.0, help="teardown: Options.kill_grace")
    parser.add_argument("--escaped", type=int, default=0, help="teardown: sleepers that leave the group (setsid)")
    parser.add_argument("--supervise", action="store_true", help="client, initialize, teardown: supervise=True")
    parser.add_argument("--clients", type=int, default=100, help="idle, many: how many clients")
    parser.add_argument("--async", dest="use_async", action="store_true", help="idle: AsyncClient")
    args = parser.parse_args()
    if args.supervise and args.row not in ("client", "initialize", "teardown"):
        parser.error(f"--supervise is not measured for {args.row}")
    if args.row == "initialize":
        report = run_initialize(args.supervise)
    elif args.row == "idle":
        report = run_idle(args.clients, args.use_async)
    elif args.row == "many":
        report = run_many(args.clients)
    elif args.row == "teardown":
        report = run_teardown(args.grandchildren, args.stubborn, args.kill_grace, args.supervise, args.escaped)
    elif args.row in ("client", "journal"):
        report = run_client(args.updates, args.reply_limit, journal=args.row == "journal", supervise=args.supervise)
    elif args.row == "async":
        report = run_async_client(args.updates, args.reply_limit)
    elif args.row == "sdk":
        report = run_sdk(args.updates)
    else:
        report = run_bare(args.updates, args.row)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
