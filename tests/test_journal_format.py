"""The journal's file: any line read back byte for byte, JSON objects embedded as they came, journals of earlier
versions, records that wait for the flush point and go out in one write, the size limit, torn and failed writes."""

from __future__ import annotations

import base64
import errno
import json
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from tinyacp._journal import _PENDING_LIMIT, iter_journal, last_epoch, read_journal

JOURNALS = Path(__file__).resolve().parent / "journals"


def chunk_line(text: str) -> bytes:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}
    return json.dumps(message, separators=(",", ":")).encode()


# The odd lines of the fixtures' second epoch (see journals/README.md), and more besides.
ODD_UPDATES = [
    chunk_line("plain"),
    chunk_line("caf\u00e9 \u2603 \U0001f600"),
    chunk_line("x" * 5000),
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
    b'"agent_message_chunk","content":{"type":"text","text":"\\ud83d"}}}}',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
    b'"agent_message_chunk","content":{"type":"text","text":",\\"msg\\":{}"}},"msg":{"len":3}}}',
]
ODD_MESSAGES = [
    b'{"jsonrpc":"2.0","method":"x/\xff\xfe"}',
    b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"result":{}}',
    b"[1,2,3]",
    b'"a string"',
    b"42",
    b'{"a":1}  ',
    b'{"a":1}\r',
    b"hello world",
    b"",
    b'{"a":"\x00"}',
    b'{"a":' + b"[" * 2000 + b"]" * 2000 + b"}",
    b'{"a":1,"a":2,"b":1e999}',
]
MORE_UPDATES = [
    b'\xef\xbb\xbf{"jsonrpc":"2.0"}',  # a BOM before the first line: recorded as it came
    b'{"jsonrpc":"2.0","x":"\xff"}',  # not UTF-8 in a field the decoder skips
    b'{"jsonrpc":"2.0"}\r',
    b"{" + b'"k":"' + b"y" * (3 << 20) + b'"}',  # longer than the size limit alone
]


def update(epoch: int, seq: int, raw: bytes) -> tinyacp.Update:
    payload = tinyacp.UnknownUpdate(None, {})
    return tinyacp.Update(epoch, seq, raw, tinyacp.UpdateKind.UNKNOWN, "s", payload)


def message(epoch: int, raw: bytes) -> tinyacp.AgentMessage:
    return tinyacp.AgentMessage(epoch, raw, tinyacp.MessageKind.INVALID, detail="odd")


def line_raws(path: Path) -> list[bytes]:
    return [tinyacp.JsonlJournal.raw(record) for record in read_journal(path).records if record["type"] == "line"]


def file_lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data.split(b"\n")[:-1]


# ----------------------------------------------------------------------------------------------------------------
# Any line, byte for byte.


@pytest.mark.parametrize("buffered", [False, True], ids=["written-at-once", "buffered"])
def test_every_line_reads_back_byte_for_byte_whatever_its_bytes(tmp_path: Path, buffered: bool) -> None:
    path = tmp_path / "j.jsonl"
    sent = b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"prompt":[]}}'
    with tinyacp.JsonlJournal(path) as journal:
        epoch = journal.begin_epoch()
        if buffered:
            journal.flush()
        for seq, raw in enumerate(ODD_UPDATES + MORE_UPDATES, 1):
            journal.on_update(update(epoch, seq, raw))
        for raw in ODD_MESSAGES:
            journal.on_message(message(epoch, raw))
        journal.on_send(tinyacp.OutgoingMessage(epoch, sent, "session/prompt", 3))
        journal.flush()

    assert line_raws(path) == [*ODD_UPDATES, *MORE_UPDATES, *ODD_MESSAGES, sent]
    for data in file_lines(path):
        json.loads(data)  # every line of the file is JSON, in UTF-8, whatever the agent sent
    # A JSON object from its first byte to its last is in the file as it came; the rest is a string or base64.
    data = path.read_bytes()
    for raw in (ODD_UPDATES[0], ODD_UPDATES[1], ODD_UPDATES[3], sent, ODD_MESSAGES[-1]):
        assert b',"msg":' + raw + b"}\n" in data
    by_raw = dict(zip(line_raws(path), [json.loads(line) for line in file_lines(path)[1:]], strict=True))
    assert "line_b64" in by_raw[ODD_MESSAGES[0]] and "line_b64" in by_raw[MORE_UPDATES[1]]
    for raw in (ODD_MESSAGES[1], ODD_MESSAGES[5], ODD_MESSAGES[6], ODD_MESSAGES[9], ODD_MESSAGES[10], MORE_UPDATES[0]):
        assert by_raw[raw]["line"].encode() == raw


def test_a_line_stored_as_msg_reads_as_a_line_record_like_any_other(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    raw = chunk_line("hi")
    with tinyacp.JsonlJournal(path) as journal:
        journal.on_update(update(4, 7, raw))
    (data,) = file_lines(path)
    on_disk = json.loads(data)
    assert list(on_disk)[-2:] == ["len", "msg"] and on_disk["len"] == len(raw)
    (record,) = tinyacp.JsonlJournal.read(path)
    assert record == {
        "type": "line",
        "epoch": 4,
        "dir": "in",
        "ts": on_disk["ts"],
        "kind": "update",
        "seq": 7,
        "line": raw.decode(),
    }
    assert last_epoch(path) == 4


@pytest.mark.parametrize(
    "damaged",
    [
        pytest.param(lambda line: line.replace(b'"len":', b'"len":1'), id="length-that-does-not-match"),
        pytest.param(lambda line: line[: line.rindex(b"}}") + 1], id="cut-after-an-inner-brace"),
        pytest.param(lambda line: line.replace(b'"type":"line"', b'"type":7'), id="type-not-a-string"),
    ],
)
def test_a_damaged_msg_line_is_unreadable_never_read_as_other_bytes(
    tmp_path: Path, damaged: Callable[[bytes], bytes]
) -> None:
    path = tmp_path / "j.jsonl"
    with tinyacp.JsonlJournal(path) as journal:
        journal.on_update(update(1, 1, chunk_line("a")))
    (line,) = file_lines(path)
    path.write_bytes(line + b"\n" + damaged(line) + b"\n" + line + b"\n")
    contents = read_journal(path)
    assert contents.unreadable == [2]
    assert [tinyacp.JsonlJournal.raw(record) for record in contents.records] == [chunk_line("a")] * 2


def test_a_batch_torn_by_a_crash_is_sealed_and_left_out(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with tinyacp.JsonlJournal(path) as journal:
        journal.begin_epoch()
        journal.flush()
        for seq in range(1, 4):
            journal.on_update(update(1, seq, chunk_line(f"u{seq}")))
        journal.flush()
    whole = path.read_bytes()
    last = file_lines(path)[-1]
    torn = last[: last.index(b"}}") + 2]  # a crash mid-write: it ends with a brace, like a whole record
    path.write_bytes(whole[: -len(last) - 1] + torn)
    contents = read_journal(path)
    assert contents.torn == torn
    assert line_raws(path) == [chunk_line("u1"), chunk_line("u2")]
    with tinyacp.JsonlJournal(path) as journal:
        assert journal.begin_epoch() == 2
    contents = read_journal(path)
    assert contents.torn is None and contents.unreadable == [4]


# ----------------------------------------------------------------------------------------------------------------
# Journals of earlier versions.


@pytest.mark.parametrize("name", ["v0.1.0", "line-field"])
def test_a_journal_of_an_earlier_version_reads_as_its_own_reader_read_it(tmp_path: Path, name: str) -> None:
    expected = json.loads((JOURNALS / f"{name}.expected.json").read_text())
    got: list[dict[str, Any]] = []
    for record in tinyacp.JsonlJournal.read(JOURNALS / f"{name}.jsonl"):
        if record["type"] == "line":
            raw = base64.b64encode(tinyacp.JsonlJournal.raw(record)).decode()
            got.append({"dir": record["dir"], "kind": record["kind"], "seq": record.get("seq"), "raw": raw})
        else:
            got.append({"type": record["type"], "epoch": record["epoch"]})
    assert got == expected
    second = [record for record in tinyacp.JsonlJournal.read(JOURNALS / f"{name}.jsonl") if record["epoch"] == 2]
    raws = [tinyacp.JsonlJournal.raw(record) for record in second if record["type"] == "line"]
    assert raws[: len(ODD_UPDATES) + len(ODD_MESSAGES)] == ODD_UPDATES + ODD_MESSAGES
    assert last_epoch(JOURNALS / f"{name}.jsonl") == 2

    # Today's journal appends to it: the old records and the new read back together.
    path = tmp_path / "j.jsonl"
    path.write_bytes((JOURNALS / f"{name}.jsonl").read_bytes())
    with tinyacp.JsonlJournal(path) as journal:
        assert journal.begin_epoch() == 3
        journal.on_update(update(3, 1, chunk_line("new")))
    assert line_raws(path)[-1] == chunk_line("new")
    assert len(read_journal(path).records) == len(expected) + 2
    assert all(line.record is not None for line in iter_journal(path))


# ----------------------------------------------------------------------------------------------------------------
# The flush point, the size limit, failed writes.


class WriteSpy:
    """Counts os.write calls to one file descriptor; can fail the next ``fail`` of them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.real = os.write
        self.fd = -1
        self.writes = 0
        self.fail = 0
        monkeypatch.setattr(os, "write", self)

    def __call__(self, fd: int, data: Any) -> int:
        if fd == self.fd:
            self.writes += 1
            if self.fail:
                self.fail -= 1
                raise OSError(errno.ENOSPC, "No space left on device")
        return self.real(fd, data)


def test_records_wait_for_the_flush_point_and_go_out_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "j.jsonl"
    spy = WriteSpy(monkeypatch)
    with tinyacp.JsonlJournal(path) as journal:
        spy.fd = journal._fd
        journal.on_update(update(1, 1, chunk_line("before any flush")))
        assert spy.writes == 1  # until the client flushes, each record is written at once
        journal.flush()
        size = path.stat().st_size
        for seq in range(2, 102):
            journal.on_update(update(1, seq, chunk_line(f"u{seq}")))
        journal.on_message(message(1, b"not json"))
        assert path.stat().st_size == size and spy.writes == 1
        journal.flush()
        assert spy.writes == 2
        journal.flush()  # nothing pending: nothing written
        assert spy.writes == 2
        records = tinyacp.JsonlJournal.read(path)
        assert [record.get("seq") for record in records] == [*range(1, 102), None]
        # One time for the records written together: taken by the first of them.
        assert len({record["ts"] for record in records[1:]}) == 1


def test_pending_records_stay_within_the_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    raw = chunk_line("z" * 10_000)
    sizes: list[int] = []
    with tinyacp.JsonlJournal(path) as journal:
        journal.flush()
        for seq in range(1, 3 * _PENDING_LIMIT // len(raw)):
            journal.on_update(update(1, seq, raw))
            sizes.append(path.stat().st_size)
        journal.flush()
    record_size = len(file_lines(path)[0]) + 1
    pending = [seq * record_size - size for seq, size in enumerate(sizes, 1)]
    assert max(pending) <= _PENDING_LIMIT + record_size
    assert sizes[-1] > 2 * _PENDING_LIMIT  # written as the limit was passed, before any flush
    assert line_raws(path) == [raw] * len(sizes)


def test_sync_true_writes_and_fsyncs_each_line_even_once_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs: list[int] = []
    real = os.fsync
    path = tmp_path / "j.jsonl"
    with tinyacp.JsonlJournal(path, sync=True) as journal:

        def fsync(fd: int) -> None:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):  # the new file's directory is fsync'ed once, with the first
                fsyncs.append(fd)
            real(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        journal.flush()
        for seq in range(1, 4):
            journal.on_update(update(1, seq, chunk_line("a")))
            assert len(file_lines(path)) == seq
        assert len(fsyncs) == 3


def test_a_failed_write_keeps_what_it_left_out_pending_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "j.jsonl"
    spy = WriteSpy(monkeypatch)
    journal = tinyacp.JsonlJournal(path)
    spy.fd = journal._fd
    journal.flush()
    journal.on_update(update(1, 1, chunk_line("a")))
    spy.fail = 1
    with pytest.raises(OSError, match="No space"):
        journal.flush()
    journal.on_update(update(1, 2, chunk_line("b")))
    journal.flush()
    assert line_raws(path) == [chunk_line("a"), chunk_line("b")]

    journal.on_update(update(1, 3, chunk_line("c")))
    spy.fail = 1
    with pytest.raises(OSError, match="No space"):
        journal.close()  # it could not write what was pending: said, and the file is closed all the same
    journal.close()
    with pytest.raises(tinyacp.UsageError, match="closed"):
        journal.on_update(update(1, 4, chunk_line("d")))
    assert line_raws(path) == [chunk_line("a"), chunk_line("b")]


def test_a_secret_is_never_written_in_an_embedded_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    secret = tinyacp.Secret("hunter2")
    raw = b'{"jsonrpc":"2.0","id":7,"method":"authenticate","params":{"methodId":"k","_meta":{"key":"hunter2"}}}'
    with tinyacp.JsonlJournal(path) as journal:
        journal.flush()
        journal.on_send(tinyacp.OutgoingMessage(1, raw, "authenticate", 7, secrets=(secret,)))
    assert b"hunter2" not in path.read_bytes()
    (record,) = tinyacp.JsonlJournal.read(path)
    assert record["redacted"] == 1
    assert tinyacp.JsonlJournal.raw(record) == raw.replace(b'"hunter2"', b'"<secret>"')


def test_records_from_several_threads_are_all_kept_each_thread_in_order(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    count = 3000
    with tinyacp.JsonlJournal(path) as journal:
        journal.flush()

        def record(epoch: int) -> None:
            for seq in range(1, count + 1):
                journal.on_update(update(epoch, seq, chunk_line("t" * 200)))
                if seq % 500 == 0:
                    journal.flush()

        threads = [threading.Thread(target=record, args=(epoch,)) for epoch in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive()
        journal.flush()
    records = tinyacp.JsonlJournal.read(path)
    for epoch in (1, 2):
        assert [record["seq"] for record in records if record["epoch"] == epoch] == list(range(1, count + 1))
