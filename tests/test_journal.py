"""The durable journal: every line in both directions, in order, byte-exact; epochs; fsync; torn lines."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import Journaled, chunk, end_turn, handshake
from tinyacp._journal import last_epoch, read_journal
from tinyacp._process import _live_group_members

DEMO = [sys.executable, "-m", "tinyacp.demo"]


def _demo_env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return env


def test_journal_records_every_line_in_both_directions_in_order_byte_exact(tmp_path: Path, make_client: Any) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    journal = tinyacp.JsonlJournal(tmp_path / "run.jsonl")
    epoch = journal.begin_epoch()
    observer = Journaled(journal)
    client = make_client(
        command=DEMO,
        env=_demo_env(),
        epoch=epoch,
        observer=observer,
        policy=tinyacp.PermissionPolicy(kinds=["read"]),
    )
    client.initialize(timeout=10)
    session = client.new_session(tmp_path, timeout=10)
    result = client.prompt(session.id, "hi", timeout=10)
    client.close()
    journal.close()
    assert result.stop_reason == "end_turn"

    records = tinyacp.JsonlJournal.read(tmp_path / "run.jsonl")
    assert records[0] == {"type": "epoch", "epoch": 1, "ts": records[0]["ts"]}
    lines = [record for record in records if record["type"] == "line"]
    expected = [
        (name, value.raw)
        for name, value in observer.events
        if name in ("update", "permission_request", "message", "send")
    ]
    assert [("out" if name == "send" else "in", raw) for name, raw in expected] == [
        (record["dir"], tinyacp.JsonlJournal.raw(record)) for record in lines
    ]
    assert all(record["epoch"] == 1 for record in records)
    updates = [record for record in lines if record["kind"] == "update"]
    assert [record["seq"] for record in updates] == [update.seq for update in observer.updates]
    assert [record["kind"] for record in lines if record["dir"] == "out"] == [
        "request",
        "request",
        "request",
        "response",
    ]
    (decision,) = [record for record in records if record["type"] == "decision"]
    assert decision["decided_by"] == "policy"
    assert decision["outcome"] == {"outcome": "selected", "optionId": "allow"}
    # The decision is recorded after the request and before our answer to it.
    index = records.index(decision)
    assert records[index - 1]["kind"] == "permission_request"
    assert records[index + 1]["dir"] == "out" and records[index + 1]["kind"] == "response"


def test_a_line_that_is_not_utf8_is_kept_in_base64_and_recovered_exactly(
    tmp_path: Path, make_client: Any, scripted: Any
) -> None:
    bad = b'{"jsonrpc":"2.0","method":"x/\xff\xfe"}'
    agent = scripted([*handshake(), {"op": "raw_b64", "data": base64.b64encode(bad + b"\n").decode()}, end_turn()])
    journal = tinyacp.JsonlJournal(tmp_path / "j.jsonl")
    client = make_client(command=agent.argv, observer=journal)
    client.initialize(timeout=10)
    session = client.new_session(tmp_path, timeout=10)
    client.prompt(session.id, "hi", timeout=10)
    client.close()
    records = tinyacp.JsonlJournal.read(tmp_path / "j.jsonl")
    (invalid,) = [record for record in records if record.get("kind") == "invalid"]
    assert "line" not in invalid
    assert tinyacp.JsonlJournal.raw(invalid) == bad


def test_begin_epoch_continues_from_the_last_epoch_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with tinyacp.JsonlJournal(path) as journal:
        assert journal.begin_epoch() == 1
        assert journal.begin_epoch() == 2
    with tinyacp.JsonlJournal(path) as journal:
        assert journal.begin_epoch() == 3
    assert [record["epoch"] for record in tinyacp.JsonlJournal.read(path)] == [1, 2, 3]


def test_last_epoch_is_found_behind_lines_longer_than_the_read_block(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    big = json.dumps({"type": "line", "epoch": 7, "dir": "in", "ts": "t", "kind": "update", "line": "x" * 200_000})
    path.write_text('{"type":"epoch","epoch":7,"ts":"t"}\n' + big + "\n" + big + "\n")
    assert last_epoch(path) == 7
    with tinyacp.JsonlJournal(path) as journal:
        assert journal.begin_epoch() == 8


def test_a_torn_last_line_is_ignored_on_read_and_sealed_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with tinyacp.JsonlJournal(path) as journal:
        assert journal.begin_epoch() == 1
    torn = b'{"type":"epoch","epoch":99,"ts":"2026'  # a crash mid-write: it claims epoch 99
    with open(path, "ab") as file:
        file.write(torn)

    contents = read_journal(path)
    assert contents.torn == torn
    assert [record["epoch"] for record in contents.records] == [1]
    assert last_epoch(path) == 1

    with tinyacp.JsonlJournal(path) as journal:
        assert journal.begin_epoch() == 2  # not 100: the torn line does not count
    data = path.read_bytes()
    assert torn + b"\n" + b'{"type":"epoch","epoch":2' in data  # sealed, never merged with the new line
    contents = read_journal(path)
    assert contents.torn is None
    assert contents.unreadable == [2]
    assert [record["epoch"] for record in contents.records] == [1, 2]


def test_a_torn_last_line_longer_than_the_read_block_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"type":"epoch","epoch":4,"ts":"t"}\n' + b'{"type":"epoch","epoch":9,"x":"' + b"y" * 200_000)
    assert last_epoch(path) == 4


def test_a_file_holding_only_a_torn_line_starts_at_epoch_one(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"type":"epoch","epo')
    assert last_epoch(path) == 0
    with tinyacp.JsonlJournal(path) as journal:
        assert journal.begin_epoch() == 1


def test_journal_file_is_readable_by_its_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        with tinyacp.JsonlJournal(tmp_path / "j.jsonl") as journal:
            journal.begin_epoch()
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "j.jsonl").st_mode) == 0o600


class FsyncSpy:
    """Records fsync calls in the order of an event list shared with an observer: ``fsync`` for a file's,
    ``fsync dir`` for a directory's."""

    def __init__(self, events: list[str], real: Any) -> None:
        self.events = events
        self.real = real

    def __call__(self, fd: int) -> None:
        self.events.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync")
        self.real(fd)


class FsyncsOf:
    """Records fsync calls under ``root`` by what they sync: the file's name (``a.jsonl``), or its directory's
    (``dir d``), found by inode."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        self.calls: list[str] = []
        self.root = root
        self.real = os.fsync
        monkeypatch.setattr(os, "fsync", self)

    def __call__(self, fd: int) -> None:
        synced = os.fstat(fd)
        for path in [self.root, *self.root.rglob("*")]:
            found = path.stat()
            if (found.st_dev, found.st_ino) == (synced.st_dev, synced.st_ino):
                self.calls.append(f"dir {path.name}" if path.is_dir() else path.name)
                break
        else:
            raise AssertionError(f"an fsync of something outside {self.root}")
        self.real(fd)

    def take(self) -> list[str]:
        calls, self.calls = self.calls, []
        return calls


def test_a_new_journals_directory_is_fsynced_after_its_first_fsync_and_never_at_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing in a new file is promised to survive a crash of the machine until its first fsync; then its name
    must be durable too, before that promise is kept: POSIX makes a file's name durable with its directory's fsync,
    not the file's."""
    (tmp_path / "d").mkdir()
    fsyncs = FsyncsOf(monkeypatch, tmp_path)
    journal = tinyacp.JsonlJournal(tmp_path / "d" / "a.jsonl")
    journal.on_send(tinyacp.OutgoingMessage(epoch=1, method="x", id=1, raw=b'{"id":1}'))  # written, not synced
    assert fsyncs.take() == []
    journal.begin_epoch()
    assert fsyncs.take() == ["a.jsonl", "dir d"]
    journal.begin_epoch()
    assert fsyncs.take() == ["a.jsonl"]  # the name is durable already
    journal.close()
    with tinyacp.JsonlJournal(tmp_path / "d" / "a.jsonl") as again:  # an existing file: its name is durable
        again.begin_epoch()
    assert fsyncs.take() == ["a.jsonl"]


def test_journals_in_one_directory_share_its_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An fsync of a directory makes durable the name of every file made in it before the fsync began: a batch's
    turns, whose journals share a directory, need far fewer of them than one each."""
    (tmp_path / "d").mkdir()
    (tmp_path / "e").mkdir()
    fsyncs = FsyncsOf(monkeypatch, tmp_path)
    a, b = tinyacp.JsonlJournal(tmp_path / "d" / "a.jsonl"), tinyacp.JsonlJournal(tmp_path / "d" / "b.jsonl")
    other = tinyacp.JsonlJournal(tmp_path / "e" / "o.jsonl")
    a.begin_epoch()
    assert fsyncs.take() == ["a.jsonl", "dir d"]
    c = tinyacp.JsonlJournal(tmp_path / "d" / "c.jsonl")  # made after d's fsync began
    b.begin_epoch()
    assert fsyncs.take() == ["b.jsonl"]  # made before it: covered
    c.begin_epoch()
    assert fsyncs.take() == ["c.jsonl", "dir d"]
    other.begin_epoch()
    assert fsyncs.take() == ["o.jsonl", "dir e"]  # another directory's fsync covers nothing here
    for journal in (a, b, c, other):
        journal.close()


def test_an_epoch_begun_not_durable_is_written_and_made_durable_by_the_next_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.jsonl"
    fsyncs = FsyncsOf(monkeypatch, tmp_path)
    with tinyacp.JsonlJournal(path) as journal:
        assert journal.begin_epoch(durable=False) == 1
        assert fsyncs.take() == []
        assert [record["epoch"] for record in tinyacp.JsonlJournal.read(path)] == [1]  # written: a crash of
        # this process keeps it
        assert journal.begin_epoch() == 2
        assert fsyncs.take() == ["a.jsonl", f"dir {tmp_path.name}"]  # the first epoch and the file's name with it
    with tinyacp.JsonlJournal(tmp_path / "s.jsonl", sync=True) as synced:
        synced.begin_epoch(durable=False)
        assert fsyncs.take() == ["s.jsonl", f"dir {tmp_path.name}"]  # sync=True: every record, the epoch too


def test_forgetting_a_directorys_last_fsync_costs_an_fsync_and_never_misses_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most a few hundred directories are remembered. Against a model of what is durable (a name is durable
    once an fsync of its directory that began after the file was made has finished), over random steps in more
    directories than are remembered: every entry made durable is durable."""
    import random

    from tinyacp import _journal

    fsynced: list[tuple[str, int]] = []  # (directory, the step at which its fsync began)
    step = [0]

    def fsync_dir(directory: Path) -> None:
        step[0] += 1
        fsynced.append((str(directory), step[0]))

    monkeypatch.setattr(_journal, "_fsync_dir", fsync_dir)
    entries = _journal._Entries()
    count = _journal._Entries._REMEMBERED + 50
    rng = random.Random(7)
    made: list[tuple[tuple[str, int], int]] = []  # (entry, the step at which the file was made)
    calls = 0
    for _ in range(6000):
        step[0] += 1
        if rng.random() < 0.5 or not made:
            entry = entries.created(tmp_path / f"d{rng.randrange(count)}" / "j.jsonl")
            made.append((entry, step[0]))
            continue
        entry, at = made.pop(rng.randrange(len(made)))
        entries.make_durable(entry)
        calls += 1
        assert any(d == entry[0] and began > at for d, began in fsynced), "made durable without an fsync after it"
        assert len(entries._covered) <= _journal._Entries._REMEMBERED
    assert len(fsynced) < calls  # shared: fewer fsyncs than entries made durable


def test_a_permission_decision_is_fsynced_before_the_answer_goes_out(
    tmp_path: Path, make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tinyacp.JsonlJournal(tmp_path / "j.jsonl")
    events: list[str] = []
    monkeypatch.setattr(os, "fsync", FsyncSpy(events, os.fsync))  # after the file's creation (its own fsync)

    class Ordered(Journaled):
        def on_permission_decision(self, request: tinyacp.PermissionRequest) -> None:
            events.append("decision")
            super().on_permission_decision(request)

        def on_send(self, message: tinyacp.OutgoingMessage) -> None:
            events.append(f"send {message.method}")
            super().on_send(message)

    client = make_client(command=DEMO, env=_demo_env(), observer=Ordered(journal))
    client.initialize(timeout=10)
    session = client.new_session(tmp_path, timeout=10)
    client.prompt(session.id, "hi", timeout=10)
    assert events == [
        "send initialize",
        "send session/new",
        "send session/prompt",
        "decision",
        "fsync",
        "fsync dir",  # the journal's first fsync: its name is made durable too, before the answer
        "send None",  # the answer to the permission request
    ]


def test_sync_true_fsyncs_every_line(tmp_path: Path, make_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = tinyacp.JsonlJournal(tmp_path / "j.jsonl", sync=True)
    events: list[str] = []
    monkeypatch.setattr(os, "fsync", FsyncSpy(events, os.fsync))
    client = make_client(command=DEMO, env=_demo_env(), observer=journal)
    client.initialize(timeout=10)
    client.close()
    records = tinyacp.JsonlJournal.read(tmp_path / "j.jsonl")
    assert len(records) == 2  # initialize, and its answer
    assert events == ["fsync", "fsync dir", "fsync"]  # each line; the new file's name with the first


def test_the_journal_decides_nothing(tmp_path: Path, make_client: Any, scripted: Any) -> None:
    request = {
        "op": "request",
        "id": 5,
        "method": "session/request_permission",
        "params": {
            "sessionId": "s1",
            "toolCall": {"toolCallId": "t", "title": "rm -rf /", "kind": "execute"},
            "options": [
                {"optionId": "ok", "name": "ok", "kind": "allow_once"},
                {"optionId": "no", "name": "no", "kind": "reject_once"},
            ],
        },
    }
    agent = scripted([*handshake(), request, {"op": "update", "session": "s1", "update": chunk("x")}, end_turn()])
    journal = tinyacp.JsonlJournal(tmp_path / "j.jsonl")
    client = make_client(command=agent.argv, observer=journal)
    client.initialize(timeout=10)
    session = client.new_session(tmp_path, timeout=10)
    client.prompt(session.id, "hi", timeout=10)
    client.close()
    (decision,) = [r for r in tinyacp.JsonlJournal.read(tmp_path / "j.jsonl") if r["type"] == "decision"]
    assert decision["decided_by"] == "default-reject"
    assert decision["outcome"] == {"outcome": "selected", "optionId": "no"}


# ----------------------------------------------------------------------------------------------------------------
# Record before act, with the records of a read burst written together at the flush point.


ASK = {
    "op": "request",
    "id": 4,
    "method": "session/request_permission",
    "params": {
        "sessionId": "s1",
        "toolCall": {"toolCallId": "t", "title": "edit", "kind": "edit"},
        "options": [{"optionId": "no", "name": "no", "kind": "reject_once"}],
    },
}


@pytest.mark.parametrize("wrapped", [False, True], ids=["journal", "forwarding-observer"])
def test_the_agent_gets_its_permission_answer_only_once_every_line_before_it_is_in_the_journal(
    tmp_path: Path, make_client: Any, scripted: Any, wrapped: bool
) -> None:
    path = tmp_path / "j.jsonl"
    count = 3000  # far more than one read, all before the request, in one burst
    agent = scripted(
        [
            *handshake(),
            {"op": "flood", "count": count, "text": "x" * 40},
            {**ASK, "check_journal": str(path)},
            end_turn(),
        ]
    )
    journal = tinyacp.JsonlJournal(path)
    observer = Journaled(journal) if wrapped else journal
    client = make_client(command=agent.argv, observer=observer, timeout=60)
    client.initialize()
    client.new_session(tmp_path)
    result = client.prompt("s1", "go")
    assert result.text.endswith(f"journal:{count}:1:1")  # what the file held when the answer reached the agent
    # The call returned: every line of the turn is in the file, before any close.
    lines = [record for record in tinyacp.JsonlJournal.read(path) if record["type"] == "line"]
    assert [record["seq"] for record in lines if record["kind"] == "update"] == list(range(1, count + 2))
    assert lines[-1]["kind"] == "response" and lines[-1]["dir"] == "in"
    client.close()
    journal.close()


def test_every_line_is_in_the_journal_when_the_call_raises(tmp_path: Path, make_client: Any, scripted: Any) -> None:
    path = tmp_path / "j.jsonl"
    agent = scripted([*handshake(), {"op": "flood", "count": 500, "text": "y"}, {"op": "exit", "code": 3}])
    journal = tinyacp.JsonlJournal(path)
    client = make_client(command=agent.argv, observer=journal, timeout=60)
    client.initialize()
    client.new_session(tmp_path)
    with pytest.raises(tinyacp.AgentExited):
        client.prompt("s1", "go")
    updates = [record for record in tinyacp.JsonlJournal.read(path) if record.get("kind") == "update"]
    assert len(updates) == 500
    journal.close()


def test_a_journal_that_cannot_write_at_the_flush_point_stops_the_client_before_it_answers(
    tmp_path: Path, make_client: Any, scripted: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "j.jsonl"
    agent = scripted([*handshake(), {"op": "flood", "count": 50, "text": "z"}, ASK, end_turn()])
    journal = tinyacp.JsonlJournal(path)
    client = make_client(command=agent.argv, observer=journal, timeout=60)
    client.initialize()
    client.new_session(tmp_path)
    real = os.write
    fd = journal._fd

    def full(target: int, data: Any) -> int:
        if target == fd and b"session/request_permission" in bytes(data):  # the disk fills up then
            raise OSError(28, "No space left on device")
        return real(target, data)

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(tinyacp.ObserverError, match="No space"):
        client.prompt("s1", "go")
    assert client.closed
    assert agent.methods() == ["initialize", "session/new", "session/prompt"]  # the request was never answered
    monkeypatch.undo()
    journal.close()  # the disk has room again: what was pending is written now
    records = tinyacp.JsonlJournal.read(path)
    assert [record.get("kind") for record in records[-2:]] == ["permission_request", None]
    assert records[-1]["type"] == "decision" and sum(record.get("kind") == "update" for record in records) == 50


def test_a_cancelled_task_leaves_every_line_it_recorded_in_the_journal(tmp_path: Path, scripted: Any) -> None:
    path = tmp_path / "j.jsonl"
    agent = scripted(
        [
            *handshake()[:2],
            {"op": "expect", "method": "session/new"},  # it floods instead of answering
            {"op": "flood", "count": 2_000_000, "text": "w"},
            {"op": "hang"},
        ]
    )
    journal = tinyacp.JsonlJournal(path)
    counted = Journaled(journal)

    async def main() -> tinyacp.AsyncClient:
        client = tinyacp.AsyncClient(tinyacp.Options(command=agent.argv, observer=counted, kill_grace=0.5))
        try:
            await client.initialize(timeout=30)
            call = asyncio.ensure_future(client.new_session(tmp_path, timeout=60))
            while len(counted.updates) < 2000 and not call.done():  # the flood goes on: the driver is mid-batch
                await asyncio.sleep(0.001)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            # Before the journal is closed, the file holds every update the observer saw.
            recorded = [record for record in tinyacp.JsonlJournal.read(path) if record.get("kind") == "update"]
            assert len(recorded) == len(counted.updates) >= 2000
        finally:
            await client.close()
        return client

    client = asyncio.run(asyncio.wait_for(main(), 60))
    journal.close()
    assert not _live_group_members(client.pid)
