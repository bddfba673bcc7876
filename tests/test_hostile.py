"""The command and the journal against a hostile agent and a hostile neighbour: escape sequences in every field,
links planted under journal names, malformed and huge journals, and JSON that is not JSON."""

from __future__ import annotations

import copy
import io
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import end_turn
from helpers.cli import CLI, Cli, Terminal
from helpers.hostile import EVIL, assert_clean
from tinyacp.cli.journals._show import show

# --------------------------------------------------------------------------------------------------------------
# 1. Every field of every message an agent sends, set to escape sequences, reaches no screen raw.

_OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]
_TOOL_CONTENT = [
    {"type": "content", "content": {"type": "text", "text": "output"}},
    {"type": "diff", "path": "/w/a.txt", "oldText": "a", "newText": "b"},
]

# The agent's side of one rich conversation: (where it goes, the message body). Each leaf is walked.
TEMPLATE: list[tuple[str, dict[str, Any]]] = [
    (
        "initialize",
        {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
            },
            "authMethods": [{"id": "login", "name": "Login", "description": "log in first"}],
            "agentInfo": {"name": "agent", "title": "The Agent", "version": "1.0"},
        },
    ),
    (
        "session/new",
        {"sessionId": "s1", "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}]}},
    ),
    ("update", {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "the prompt"}}),
    ("update", {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "thinking"}}),
    (
        "update",
        {
            "sessionUpdate": "plan",
            "entries": [{"content": "read", "priority": "high", "status": "in_progress"}],
        },
    ),
    (
        "update",
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Read a.txt",
            "kind": "read",
            "status": "pending",
            "content": _TOOL_CONTENT,
            "locations": [{"path": "/w/a.txt", "line": 1}],
            "rawInput": {"path": "/w/a.txt"},
        },
    ),
    (
        "permission",
        {
            "sessionId": "s1",
            "toolCall": {
                "toolCallId": "t1",
                "title": "Read a.txt",
                "kind": "read",
                "status": "pending",
                "content": _TOOL_CONTENT,
                "locations": [{"path": "/w/a.txt"}],
                "rawInput": {"path": "/w/a.txt"},
            },
            "options": _OPTIONS,
        },
    ),
    (
        "update",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "title": "Read a.txt",
            "kind": "read",
            "status": "completed",
            "content": _TOOL_CONTENT,
            "locations": [{"path": "/w/a.txt"}],
            "rawOutput": {"text": "output"},
        },
    ),
    (
        "update",
        {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "c", "description": "d"}]},
    ),
    ("update", {"sessionUpdate": "current_mode_update", "currentModeId": "code"}),
    ("update", {"sessionUpdate": "config_option_update", "configOptions": [{"id": "o", "name": "O"}]}),
    ("update", {"sessionUpdate": "session_info_update", "title": "a title", "updatedAt": "2026-01-01T00:00:00Z"}),
    ("update", {"sessionUpdate": "usage_update", "used": 10, "size": 100, "cost": {"amount": 0.5, "currency": "EUR"}}),
    # The kinds newer than schema v1.21 (the command opts in to all of them).
    ("update", {"sessionUpdate": "notice", "severity": "warning", "title": "Model fallback", "description": "smaller"}),
    ("update", {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"}),
    (
        "update",
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": {"type": "text", "text": "sum"}},
    ),
    ("update", {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p1", "content": "# plan"}}),
    ("update", {"sessionUpdate": "plan_removed", "planId": "p1"}),
    ("update", {"sessionUpdate": "subagent_update", "sessionId": "s1.child", "title": "Helper", "description": "d"}),
    (
        "update",
        {
            "sessionUpdate": "session_message",
            "messageId": "m1",
            "senderSessionId": "s1",
            "recipientSessionId": "s1.child",
            "content": [{"type": "text", "text": "do it"}],
        },
    ),
    (
        "update",
        {"sessionUpdate": "session_message_chunk", "messageId": "m1", "content": {"type": "text", "text": "done"}},
    ),
    ("update", {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "the reply\n"}}),
    ("prompt", {"stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 2}}),
]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path


def _fields() -> list[tuple[int, tuple[Any, ...]]]:
    return [(index, path) for index, (_, body) in enumerate(TEMPLATE) for path in _leaves(body)]


def _with_evil(index: int, path: tuple[Any, ...]) -> list[tuple[str, dict[str, Any]]]:
    messages = copy.deepcopy(TEMPLATE)
    target: Any = messages[index][1]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = EVIL
    return messages


ONCE = ("initialize", "session/new", "prompt")
"""The messages that come once in a run (the handshake's answers, the prompt's); the others come in the turn."""


def _handshake_steps(messages: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for where, body in messages:
        if where in ("initialize", "session/new"):
            steps += [{"op": "expect", "method": where}, {"op": "reply", "result": body}]
    return [*steps, {"op": "expect", "method": "session/prompt"}]


def _turn_steps(messages: list[tuple[str, dict[str, Any]]], request_id: int = 7) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for where, body in messages:
        if where == "update":
            steps.append({"op": "update", "update": body})
        elif where == "permission":
            steps.append({"op": "request", "id": request_id, "method": "session/request_permission", "params": body})
    return steps


def _end_steps(messages: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [end_turn() | {"result": body} for where, body in messages if where == "prompt"]


def _steps(messages: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return _handshake_steps(messages) + _turn_steps(messages) + _end_steps(messages)


def _renamed(value: Any, old: str, new: str) -> Any:
    """``value`` with every leaf equal to ``old`` replaced by ``new``."""
    if isinstance(value, dict):
        return {key: _renamed(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_renamed(item, old, new) for item in value]
    return new if value == old else value


def _walk_the_turn() -> tuple[list[dict[str, Any]], int]:
    """One run whose single turn holds, for each field of an update or a permission request, the turn's messages
    with that field (alone) set to EVIL, each copy with a tool call id of its own; and how many messages that is."""
    turn: list[dict[str, Any]] = []
    for number, (index, path) in enumerate(_fields()):
        if TEMPLATE[index][0] not in ONCE:
            messages = [(where, _renamed(body, "t1", f"t1-{number}")) for where, body in _with_evil(index, path)]
            turn += _turn_steps(messages, request_id=100 + number)
    return _handshake_steps(TEMPLATE) + turn + _end_steps(TEMPLATE), len(turn)


def _field_id(field: tuple[int, tuple[Any, ...]]) -> str:
    index, path = field
    body = TEMPLATE[index][1]
    name = body.get("sessionUpdate", TEMPLATE[index][0])
    return f"{name}:" + ".".join(map(str, path))


def _show_text(path: Path, fmt: str = "text") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = show(path, fmt, out, err)
    return code, out.getvalue(), err.getvalue()


def _agent_messages(journal: Path) -> int:
    """How many updates and permission requests from the agent the journal holds."""
    records = [json.loads(line) for line in journal.read_bytes().splitlines()]
    kinds = ("update", "permission_request")
    return sum(record.get("type") == "line" and record.get("kind") in kinds for record in records)


def _assert_run_is_clean(cli: Cli, steps: list[dict[str, Any]]) -> tuple[int, Path]:
    """Run ``tinyacp prompt`` with this agent on a pseudo-terminal: neither its screen nor ``show`` of its journal
    holds anything a terminal acts on, and ``show --format json`` is strict JSON. Returns the exit status and the
    journal."""
    journal = cli.tmp / "run.jsonl"
    terminal = Terminal(cli, "prompt", "-y", "--journal", str(journal), "--agent", cli.scripted(steps), "hi")
    status = terminal.finish(timeout=120)
    assert b"Traceback" not in terminal.output
    assert_clean(terminal.output, ours=True)
    code, out, err = _show_text(journal)
    assert code == 0 and "Traceback" not in err
    assert_clean(out)
    assert_clean(err)
    code, out, _ = _show_text(journal, "json")
    assert code == 0
    assert out.isascii()
    for line in out.splitlines():
        json.loads(line, parse_constant=_no_constant)
    return status, journal


@pytest.mark.parametrize("field", [field for field in _fields() if TEMPLATE[field[0]][0] in ONCE], ids=_field_id)
def test_an_escape_sequence_in_any_field_of_a_once_per_run_message_reaches_neither_the_prompt_screen_nor_show(
    cli: Cli, field: tuple[int, tuple[Any, ...]]
) -> None:
    _assert_run_is_clean(cli, _steps(_with_evil(*field)))


def test_an_escape_sequence_in_any_field_of_the_turn_reaches_neither_the_prompt_screen_nor_show(cli: Cli) -> None:
    steps, messages = _walk_the_turn()
    status, journal = _assert_run_is_clean(cli, steps)
    assert status == 0  # the turn ran to its end: every copy reached the display
    assert _agent_messages(journal) == messages


def test_the_walk_covers_every_update_kind_the_permission_request_and_both_answers() -> None:
    kinds = {body.get("sessionUpdate") for where, body in TEMPLATE if where == "update"}
    assert kinds == {str(kind) for kind in tinyacp.UpdateKind} - {"unknown"}
    assert {where for where, _ in TEMPLATE} == {"initialize", "session/new", "update", "permission", "prompt"}


def test_an_unknown_stop_reason_and_a_tool_status_with_escapes_are_shown_clean_without_a_terminal(cli: Cli) -> None:
    messages = copy.deepcopy(TEMPLATE)
    messages[7][1]["status"] = EVIL  # the tool call update
    messages[-1][1]["stopReason"] = EVIL
    done = cli.run("prompt", "-y", "--agent", cli.scripted(_steps(messages)), "hi")
    assert done.returncode == 4, done.stderr  # a stop reason outside ACP v1
    assert_clean(done.stderr)
    err = done.stderr.decode()
    assert "ALB" in err  # what is left of EVIL: its printable text, nothing a terminal acts on


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# --------------------------------------------------------------------------------------------------------------
# 2. Journals never follow links; the default directory is private; each run's file is new and unguessable.


def test_a_journal_path_that_is_a_symlink_is_refused_and_its_target_untouched(cli: Cli) -> None:
    target = cli.tmp / "victim.txt"
    target.write_text("precious\n")
    link = cli.tmp / "run.jsonl"
    link.symlink_to(target)
    done = cli.run("prompt", "-y", "--journal", str(link), "hello")
    assert done.returncode == 2
    assert "symbolic link" in done.stderr.decode() and b"Traceback" not in done.stderr
    assert target.read_text() == "precious\n"
    with pytest.raises(OSError, match="symbolic link"):
        tinyacp.JsonlJournal(link)
    dangling = cli.tmp / "dangling.jsonl"
    dangling.symlink_to(cli.tmp / "would-be-created")
    with pytest.raises(OSError):
        tinyacp.JsonlJournal(dangling)
    assert not (cli.tmp / "would-be-created").exists()


def test_a_journal_path_that_is_a_fifo_is_refused_without_blocking(cli: Cli) -> None:
    fifo = cli.tmp / "fifo.jsonl"
    os.mkfifo(fifo)
    done = cli.run("prompt", "-y", "--journal", str(fifo), "hello")
    assert done.returncode == 2 and "not a regular file" in done.stderr.decode()


def test_default_journals_get_an_unpredictable_name_and_a_planted_link_receives_nothing(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli.run("prompt", "-y", "hello").returncode == 0
    assert cli.run("prompt", "-y", "hello").returncode == 0
    directory = cli.tmp / "state" / "tinyacp" / "journals"
    names = sorted(path.name for path in directory.iterdir())
    assert len(names) == 2
    for name in names:
        random_part = name.removesuffix(".jsonl").rsplit("-", 1)[1]
        assert len(random_part) == 16 and int(random_part, 16) >= 0

    # A link planted under the very name the next run would pick (were it guessable) is skipped, never opened.
    import secrets

    from tinyacp.cli.shared import _dirs

    victim = cli.tmp / "victim.txt"
    victim.write_text("precious\n")
    guesses = iter(["0" * 16, "1" * 16])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(guesses))
    (directory / f"run-{'0' * 16}.jsonl").symlink_to(victim)
    created = _dirs.new_private_file(directory, "run", ".jsonl")
    assert created.name == f"run-{'1' * 16}.jsonl"
    assert stat.S_IMODE(created.lstat().st_mode) == 0o600 and not created.is_symlink()
    assert victim.read_text() == "precious\n"


def test_a_journal_directory_others_can_write_is_refused_with_the_fix(cli: Cli) -> None:
    directory = cli.tmp / "state" / "tinyacp" / "journals"
    directory.mkdir(parents=True)
    directory.chmod(0o777)
    done = cli.run("prompt", "-y", "hello")
    assert done.returncode == 2
    err = done.stderr.decode().strip()
    assert "\n" not in err and "writable by others" in err and f"chmod go-w {directory}" in err
    assert list(directory.iterdir()) == []
    directory.chmod(0o700)
    assert cli.run("prompt", "-y", "hello").returncode == 0


def test_every_directory_created_for_journals_is_private_whatever_the_umask(tmp_path: Path) -> None:
    from tinyacp.cli.shared._dirs import private_dir

    old = os.umask(0o002)
    try:
        private_dir(tmp_path / "state" / "tinyacp" / "journals")
    finally:
        os.umask(old)
    for directory in ("state", "state/tinyacp", "state/tinyacp/journals"):
        assert stat.S_IMODE((tmp_path / directory).stat().st_mode) == 0o700, directory


def test_a_state_directory_others_can_write_does_not_stop_a_run_without_a_journal(cli: Cli) -> None:
    state = cli.tmp / "state" / "tinyacp"
    state.mkdir(parents=True)
    state.chmod(0o777)
    done = cli.run("prompt", "-y", "--no-journal", "hello")
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr and f"chmod go-w {state}".encode() in done.stderr
    state.chmod(0o700)


def test_a_journal_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    from tinyacp.cli.shared._dirs import UnsafeDirectory, check_private

    mode = stat.S_IFDIR | 0o700
    other = os.stat_result((mode, 0, 0, 2, os.geteuid() + 1, 0, 4096, 0, 0, 0))
    with pytest.raises(UnsafeDirectory, match=r"belongs to another user .* XDG_STATE_HOME"):
        check_private(tmp_path, other)
    check_private(tmp_path, os.stat_result((mode, 0, 0, 2, os.geteuid(), 0, 4096, 0, 0, 0)))
    group = os.stat_result((stat.S_IFDIR | 0o770, 0, 0, 2, os.geteuid(), 0, 4096, 0, 0, 0))
    with pytest.raises(UnsafeDirectory, match="chmod go-w"):
        check_private(tmp_path, group)


# --------------------------------------------------------------------------------------------------------------
# 3. Malformed journals: `show` renders what it can (the rest raw), `replay` serves what it can; no traceback.


def _line(message: str | bytes, **fields: Any) -> dict[str, Any]:
    record = {"type": "line", "epoch": 1, "dir": "in", "ts": "t", "kind": "update", **fields}
    if isinstance(message, bytes):
        record["line"] = message.decode()
    else:
        record["line"] = message
    return record


def _update(update: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}})


DEEP = "[" * 100_000 + "]" * 100_000
MALFORMED: dict[str, bytes] = {
    "deep line": json.dumps(_line(DEEP)).encode(),
    "deep record": b'{"type":"line","epoch":1,"x":' + DEEP.encode() + b"}",
    "plan entries a number": json.dumps(_line(_update({"sessionUpdate": "plan", "entries": 5}))).encode(),
    "plan entry statuses a list": json.dumps(
        _line(_update({"sessionUpdate": "plan", "entries": [{"content": ["x"], "status": ["y"]}]}))
    ).encode(),
    "no line": json.dumps({"type": "line", "epoch": 1, "dir": "in", "kind": "update"}).encode(),
    "bad base64": json.dumps({"type": "line", "epoch": 1, "dir": "in", "kind": "update", "line_b64": "!!"}).encode(),
    "line an object": json.dumps({"type": "line", "epoch": 1, "dir": "in", "line": {"a": 1}}).encode(),
    "ids objects": json.dumps(_line('{"jsonrpc":"2.0","id":{"a":[1]},"result":{}}', kind="response")).encode(),
    "method a number": json.dumps(_line('{"jsonrpc":"2.0","id":1,"method":5}', kind="request", method=5)).encode(),
    "tool content a string": json.dumps(
        _line(_update({"sessionUpdate": "tool_call_update", "toolCallId": 1, "status": "completed", "content": "x"}))
    ).encode(),
    "decision junk": json.dumps({"type": "decision", "epoch": 1, "id": [1], "outcome": 5}).encode(),
    "epoch a string": b'{"type":"epoch","epoch":"1"}',
    "not json": b"\x00\xff\x1b[2J garbage",
}


@pytest.fixture(scope="module")
def demo_journal(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real run of the demo agent, journaled: made once, spoilt by each test its own way."""
    tmp = tmp_path_factory.mktemp("demo")
    path = tmp / "demo.jsonl"
    done = Cli(tmp).run("prompt", "-y", "--journal", str(path), "hello")
    assert done.returncode == 0, done.stderr
    return path.read_bytes()


def _journal_with(tmp_path: Path, demo: bytes, bad: bytes) -> Path:
    """The demo run's journal (replayable) with one malformed line in the middle."""
    path = tmp_path / "run.jsonl"
    good = demo.splitlines(keepends=True)
    path.write_bytes(b"".join(good[:3]) + bad + b"\n" + b"".join(good[3:]))
    return path


@pytest.mark.parametrize("name", list(MALFORMED))
def test_show_renders_a_malformed_line_raw_and_goes_on(tmp_path: Path, demo_journal: bytes, name: str) -> None:
    path = _journal_with(tmp_path, demo_journal, MALFORMED[name])
    code, out, err = _show_text(path)
    assert code == 0
    assert_clean(out)
    assert_clean(err)
    assert "< stop reason: end_turn" in out  # the lines after the bad one are rendered
    code, out, _ = _show_text(path, "json")
    assert code == 0 and out.isascii()
    assert all(json.loads(line, parse_constant=_no_constant) for line in out.splitlines())


@pytest.mark.parametrize("name", list(MALFORMED))
def test_replay_serves_the_records_it_can_around_a_malformed_line(
    cli: Cli, tmp_path: Path, demo_journal: bytes, name: str
) -> None:
    path = _journal_with(tmp_path, demo_journal, MALFORMED[name])
    agent = " ".join([*CLI, "replay", str(path)])
    done = cli.run("prompt", "-y", "--no-journal", "--agent", agent, "hello")
    assert b"Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"You said: hello\n")


def test_show_of_a_missing_or_unreadable_journal_is_one_line_and_exit_2(cli: Cli) -> None:
    for path in (cli.tmp / "missing.jsonl", cli.tmp):
        done = cli.run("show", str(path))
        assert done.returncode == 2
        assert done.stderr.decode().count("\n") == 1 and b"Traceback" not in done.stderr
    done = cli.run("replay", str(cli.tmp / "missing.jsonl"))
    assert done.returncode == 2 and done.stderr.decode().count("\n") == 1


def test_show_into_a_pipe_closed_early_exits_0_quietly(cli: Cli, demo_journal: bytes) -> None:
    path = cli.tmp / "long.jsonl"
    path.write_bytes(demo_journal * 400)  # far more output than a pipe holds
    proc = subprocess.Popen(
        [*CLI, "show", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli.env, cwd=cli.work
    )
    cli.procs.append(proc)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"== epoch 1")
    proc.stdout.close()
    assert proc.wait(timeout=30) == 0
    assert proc.stderr.read() == b""
    proc.stderr.close()


# --------------------------------------------------------------------------------------------------------------
# 5. `show --format json` prints strict JSON.


def test_show_json_prints_no_nan_or_infinity(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    lines = [
        _line('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"x":NaN}}}'),
        _line('{"jsonrpc":"2.0","id":1,"result":{"a":Infinity,"b":-Infinity}}', kind="response"),
        _line('{"jsonrpc":"2.0","id":2,"result":{"big":1e999}}', kind="response"),
        _line('{"jsonrpc":"2.0","id":3,"result":{"fine":1.5,"huge":123456789012345678901234567890}}', kind="response"),
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"type":"epoch","epoch":1,"x":1e999}\n')
    code, out, err = _show_text(path, "json")
    assert code == 0
    records = [json.loads(line, parse_constant=_no_constant) for line in out.splitlines()]
    assert [record["message"] for record in records[:3]] == [None, None, None]
    assert records[3]["message"]["result"] == {"fine": 1.5, "huge": 123456789012345678901234567890}
    assert len(records) == 4 and "ignored: 5" in err  # the record with a number out of range is no record


# --------------------------------------------------------------------------------------------------------------
# 4. `show` streams: a journal five times the size of its address space limit renders under that limit.

_LIMIT = 80 << 20
"""The address space `show` gets: twice what it takes (about 40 MiB, most of it the interpreter)."""
_SIZE = 5 * _LIMIT
_SHOW_UNDER_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from tinyacp.cli import main
sys.exit(main(["show", "--format", sys.argv[2], sys.argv[1]]))
"""


def _big_journal(path: Path, head: bytes) -> int:
    """A journal of :data:`_SIZE` bytes: a real run's records, then reply chunks of 1 MiB lines and, between them,
    holes (sparse runs of NUL bytes, each a junk line of 1 MiB) so the file is cheap to write; returns the number of
    chunks."""
    chunk_text = ("reply text " * 95_000)[:1_000_000] + "\n"
    line = json.dumps(
        _line(_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": chunk_text}}))
    )
    data = (line + "\n").encode()
    chunks = 0
    with open(path, "wb") as file:
        file.write(head)
        while file.tell() < _SIZE - (4 << 20):
            file.write(data)
            chunks += 1
            file.seek(1 << 20, os.SEEK_CUR)  # a hole of NULs ...
            file.write(b"\n")  # ... ended as a line of its own
    return chunks


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_show_renders_a_journal_five_times_its_address_space_limit(
    tmp_path: Path, demo_journal: bytes, fmt: str
) -> None:
    path = tmp_path / "big.jsonl"
    chunks = _big_journal(path, demo_journal)
    assert path.stat().st_size >= _SIZE - (4 << 20)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    with open(tmp_path / "out", "wb") as out:
        done = subprocess.run(
            [sys.executable, "-c", _SHOW_UNDER_LIMIT.format(limit=_LIMIT), str(path), fmt],
            stdout=out,
            stderr=subprocess.PIPE,
            env=env,
            timeout=540,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    size = (tmp_path / "out").stat().st_size
    if fmt == "text":
        assert size > chunks * 900_000  # every chunk's text was rendered
    else:
        assert size > chunks * 1_000_000
    assert b"MemoryError" not in done.stderr and b"Traceback" not in done.stderr


def test_the_batch_summary_shows_an_agents_currency_clean() -> None:
    from types import SimpleNamespace

    from tinyacp.cli.batch._batch import summary_table

    agent = SimpleNamespace(median_seconds=1.0, cost={f"EUR{EVIL}": 1.5}, ok=1, failed=0)
    summary = SimpleNamespace(
        agents={"a": agent}, ok=1, failed=0, missing=0, ran=1, skipped=0, seconds=1.0, results="out"
    )
    table = summary_table(summary)
    assert_clean(table)
    assert "1.5000 EURA" in table
