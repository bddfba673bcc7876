"""What a turn's children cost the conversation core: ``python -m benchmarks.subagents``.

N children announced as siblings (each by the turn's session) against N announced as a chain (each by the one
before), through the conversation core alone (no process, no observer work), with the limits raised so that every
child is kept. Each child's root is kept when it is announced, so a chain should cost what as many siblings cost;
before, each announcement walked the chain up to the turn's session, and a chain cost its length squared. Prints a
Markdown table; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import time

from tinyacp import ClientFeatures, ClientInfo, LineReader, PermissionPolicy, ReaderLimits, TransferLimits, Update
from tinyacp._conversation import Conversation

SESSION = "s1"


def _lines(count: int, *, chain: bool) -> list[bytes]:
    lines = []
    for index in range(count):
        parent = f"c{index - 1}" if chain and index else SESSION
        update = {"sessionUpdate": "subagent_update", "sessionId": f"c{index}", "title": "t"}
        message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": parent, "update": update}}
        lines.append(json.dumps(message, separators=(",", ":")).encode())
    return lines


def seconds(count: int, *, chain: bool) -> float:
    """How long the core takes to record and act on ``count`` announcements, in one prompt turn."""
    unbounded = TransferLimits(max_subagents=1 << 40, max_subagent_bytes=1 << 40)
    core = Conversation(
        epoch=1,
        transfer_limits=unbounded,
        reader_limits=ReaderLimits(),
        policy=PermissionPolicy(),
        client_info=ClientInfo("bench", "1"),
        has_observer=True,
        features=ClientFeatures(subagents=True),
    )
    LineReader(None, ReaderLimits())  # as a client makes one; not timed
    core.prompt(SESSION, "go")
    lines = _lines(count, chain=chain)
    start = time.perf_counter()
    for raw in lines:
        update = core.receive(raw)
        assert isinstance(update, Update)
        core.update_recorded(update)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[3_000, 6_000, 12_000])
    args = parser.parse_args()
    print("| children | siblings | a chain | chain / siblings |")
    print("| ---: | ---: | ---: | ---: |")
    for count in args.counts:
        siblings = min(seconds(count, chain=False) for _ in range(3))
        chain = min(seconds(count, chain=True) for _ in range(3))
        print(f"| {count:,} | {siblings:.3f} s | {chain:.3f} s | {chain / siblings:.1f} |")


if __name__ == "__main__":
    main()
