"""What an update costs, step by step, and the most a client that records each one can reach:
``python -m benchmarks.update_cost``.

The flood rows of :mod:`benchmarks.run` set ``Client`` against a bare ``readline`` + msgspec decode loop. This
breaks the client's side of that ratio into the steps it takes per update, in one process, with no pipe and no
agent (the lines are the flood agent's, cut into the batches tinyacp's reader hands out), so that what each step
adds is read apart and the machine's noise is the same for every row:

* ``bare``: the benchmark's bare loop, ``readline`` from a 64 KiB buffered reader and one decode per line;
* ``split + decode``: the reader's batches (a 16 KiB window cut at its newlines) and one decode per line;
* ``+ Update``: and a :class:`~tinyacp.Update` per line, the record every observer is handed;
* ``+ observer call``: and a call of an observer method that does nothing. This is the floor of any client that
  hands the caller each update, as received and numbered, before acting on it (tinyacp's promise 2): no
  bookkeeping, no limit, no reply kept;
* ``+ Update, in C``: the same records made by ``map`` over ``operator.attrgetter`` (no Python frame, no bytecode
  per update), to show whether moving the per-update steps out of the loop pays;
* ``Conversation``: what ``Client`` runs per update, less the pipe: the core's ``receive_updates`` (numbering, the
  transfer and reply limits, the run's text), a no-op observer method per update, then ``updates_recorded``;

Each row is the best of ``--rounds`` passes over ``--updates`` lines, in nanoseconds per update, with its ratio to
``bare`` as updates per second (``bare``'s time over the row's: the figure the flood rows' goal is stated in).
Output is Markdown. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import io
import itertools
import operator
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec

import tinyacp
from benchmarks.common import table
from benchmarks.flood_agent import SESSION_ID, update_line
from tinyacp._conversation import Conversation
from tinyacp._messages import UpdateLine

WINDOW = 16 * 1024
"""The reader's batch: every complete line of up to this many buffered bytes (``tinyacp.reader``)."""

Step = Callable[[], None]


def batches(data: bytes) -> list[tuple[int, int]]:
    """Where the reader's batches of ``data`` start and end (the end at the window's last newline)."""
    spans = []
    start = 0
    while start < len(data):
        last = data.rfind(b"\n", start, start + WINDOW)
        spans.append((start, last))
        start = last + 1
    return spans


class _Quiet(tinyacp.BaseObserver):
    """An observer whose ``on_update`` does nothing, as a method of the caller's class."""

    def on_update(self, update: tinyacp.Update) -> None:
        return None


_PARAMS_OF, _UPDATE_OF, _SESSION_OF = (operator.attrgetter(name) for name in ("params", "update", "session_id"))
_CHUNK = tinyacp.UpdateKind.AGENT_MESSAGE_CHUNK


class Flood:
    """``updates`` lines of the flood agent, and each row's pass over them."""

    def __init__(self, updates: int) -> None:
        self.updates = updates
        self.data = update_line(SESSION_ID) * updates
        self.view = memoryview(self.data)
        self.spans = batches(self.data)
        self.decode = msgspec.json.Decoder(UpdateLine).decode
        self.on_update = _Quiet().on_update

    def rows(self) -> dict[str, Step]:
        return {
            "bare": self.bare,
            "split + decode": self.split_decode,
            "+ Update": self.with_update,
            "+ observer call": self.with_call,
            "+ Update, in C": self.in_c,
            "Conversation": lambda: self.conversation(self.on_update),
        }

    def batch_lines(self) -> Iterator[list[bytes]]:
        view = self.view
        for start, end in self.spans:
            yield view[start:end].tobytes().split(b"\n")

    def bare(self) -> None:
        readline = io.BufferedReader(io.BytesIO(self.data), 64 * 1024).readline
        decode = self.decode
        for _ in range(self.updates):
            decode(readline())

    def split_decode(self) -> None:
        decode = self.decode
        for lines in self.batch_lines():
            for raw in lines:
                decode(raw)

    def records(self, lines: list[bytes], seq: int) -> list[tinyacp.Update]:
        run: list[tinyacp.Update] = []
        append = run.append
        decode, update = self.decode, tinyacp.Update
        for raw in lines:
            params = decode(raw).params
            seq += 1
            append(update(1, seq, raw, _CHUNK, params.session_id, params.update))
        return run

    def with_update(self) -> None:
        seq = 0
        for lines in self.batch_lines():
            seq += len(self.records(lines, seq))

    def with_call(self) -> None:
        seq = 0
        on_update = self.on_update
        for lines in self.batch_lines():
            run = self.records(lines, seq)
            seq += len(run)
            for update in run:
                on_update(update)

    def in_c(self) -> None:
        seq = 0
        on_update = self.on_update
        for lines in self.batch_lines():
            params = list(map(_PARAMS_OF, map(self.decode, lines)))
            numbers = range(seq + 1, seq + len(lines) + 1)
            seq += len(lines)
            sessions, payloads = map(_SESSION_OF, params), map(_UPDATE_OF, params)
            epochs, kinds = itertools.repeat(1), itertools.repeat(_CHUNK)
            for update in list(map(tinyacp.Update, epochs, numbers, lines, kinds, sessions, payloads)):
                on_update(update)

    def conversation(self, observe: Callable[[tinyacp.Update], Any]) -> None:
        limits = tinyacp.TransferLimits(max_reply_bytes=self.updates * 64, max_reply_chunks=self.updates + 1)
        core = Conversation(
            epoch=1,
            transfer_limits=limits,
            reader_limits=tinyacp.ReaderLimits(),
            policy=tinyacp.PermissionPolicy(),
            client_info=tinyacp.ClientInfo(name="benchmark", version="0"),
            has_observer=True,
        )
        core.prompt(SESSION_ID, "flood")  # the turn whose reply the core keeps (its request is not sent)
        receive, recorded = core.receive_updates, core.updates_recorded
        for lines in self.batch_lines():
            at = 0
            while at < len(lines):
                run = receive(lines, at)
                if not run:
                    raise AssertionError("every line of the flood is an update the core takes in a run")
                at += len(run)
                for update in run:
                    observe(update)
                recorded(run)
        if core.seq != self.updates:
            raise AssertionError(f"{core.seq} updates numbered, {self.updates} sent")


def best(step: Step, rounds: int) -> float:
    """The fastest of ``rounds`` passes, in seconds."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return min(times)


def report(updates: int, rounds: int) -> list[str]:
    """The table, as Markdown lines."""
    timed = {name: best(step, rounds) for name, step in Flood(updates).rows().items()}
    floor = timed["bare"]
    rows = [[f"`{name}`", f"{took / updates * 1e9:.0f}", f"{floor / took:.2f}x"] for name, took in timed.items()]
    header = ["row", "ns per update", "updates/s over `bare`"]
    return [f"{updates} updates, best of {rounds} passes", "", *table(header, rows)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--updates", type=int, default=200_000, help="lines per pass (default 200000)")
    parser.add_argument("--rounds", type=int, default=7, help="passes per row, the best counts (default 7)")
    parser.add_argument("--quick", action="store_true", help="2000 updates, 2 passes: checks that it runs")
    args = parser.parse_args(argv)
    updates, rounds = (2_000, 2) if args.quick else (args.updates, args.rounds)
    print("\n".join(report(updates, rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
