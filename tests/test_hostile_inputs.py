"""Hostile inputs, round three: the session index, the batch directories, overlapping secrets, and every file
and argument the command reads (FIFOs, nesting, damaged lines, typos). Each test failed on 0.2.0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import msgspec
import pytest

import tinyacp
from helpers import end_turn, handshake
from helpers.cli import CLI, Cli
from helpers.hostile import sent_line
from tinyacp.batch import read_results, run_batch

ITEM = {"id": "one", "prompt": "list the files"}


def _index(cli: Cli) -> Path:
    return cli.tmp / "state" / "tinyacp" / "sessions.jsonl"


def _index_line(session_id: str, when: Any = 1.7e9, agent: str = "demo", cwd: str = "/w") -> bytes:
    fields = {"agent": agent, "cwd": cwd, "session_id": session_id, "journal": None, "title": "t"}
    return json.dumps({**fields, "time": when}).encode() + b"\n"


def _sessions(cli: Cli) -> list[str]:
    done = cli.run("sessions", "--format", "json")
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    document = json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"bare {name} in the JSON"))
    return [entry["session_id"] for entry in document["sessions"]]


def _no_traceback(done: subprocess.CompletedProcess[bytes], status: int) -> str:
    err = done.stderr.decode(errors="replace")
    assert done.returncode == status, err
    assert "Traceback" not in err, err
    return err


# --------------------------------------------------------------------------------------------------------------
# 1 and 6. The session index: a huge id wipes nothing, damaged lines are skipped.


def test_a_session_id_of_a_megabyte_is_not_indexed_said_so_and_every_other_session_stays(cli: Cli) -> None:
    assert cli.run("prompt", "-q", "--agent", "demo", "hello").returncode == 0
    before = _sessions(cli)
    assert len(before) == 1
    huge = "s" * (1024 * 1024)
    done = cli.run("prompt", "--agent-command", cli.scripted([*handshake(huge), end_turn()]), "hi")
    err = _no_traceback(done, 0)
    assert "not noted for --continue" in err
    assert _sessions(cli) == before
    assert cli.run("prompt", "-q", "--agent", "demo", "--continue", "again").returncode == 0


def test_an_index_ending_in_a_megabyte_line_keeps_its_sessions_through_reading_and_compaction(cli: Cli) -> None:
    index = _index(cli)
    index.parent.mkdir(parents=True)
    # What 0.2.0 wrote for a huge id: the last line alone is longer than it read, and compaction emptied the file.
    index.write_bytes(_index_line("kept-1") + _index_line("kept-2") + _index_line("x" * (1024 * 1024)))
    assert _sessions(cli) == ["kept-2", "kept-1"]
    assert cli.run("prompt", "-q", "--agent", "demo", "hello").returncode == 0  # past the compaction size: compacts
    assert index.stat().st_size < 64 * 1024
    assert _sessions(cli)[1:] == ["kept-2", "kept-1"]


@pytest.mark.parametrize(
    "damaged",
    [
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
        b"[" * 100_000 + b"]" * 100_000,
        _index_line("nan", float("nan")),
        _index_line("inf", float("inf")),
        _index_line("big", 1e300),
        _index_line("digits").replace(b"1700000000.0", b"9" * 400),
        _index_line("negative", -5),
        _index_line("text", "soon"),
        b'{"agent": 1, "cwd": [], "session_id": {}, "time": 1}',
        b"\xff\xfe not json",
    ],
    ids=["deep-object", "deep-array", "nan", "infinity", "1e300", "400-digits", "negative", "text", "types", "bytes"],
)
def test_a_damaged_index_line_is_skipped_by_sessions_and_continue(cli: Cli, damaged: bytes) -> None:
    index = _index(cli)
    index.parent.mkdir(parents=True)
    good = _index_line("good", agent="demo", cwd=str(cli.work))
    index.write_bytes(good + damaged + b"\n")
    assert _sessions(cli) == ["good"]
    assert cli.run("sessions").returncode == 0
    done = cli.run("prompt", "-q", "--agent", "demo", "--continue", "hello")
    # The good line was found and asked for: the demo agent knows no session "good", a clear error.
    assert "unknown session" in _no_traceback(done, 1)


# --------------------------------------------------------------------------------------------------------------
# 2. Every file read or appended to is a regular file: a FIFO, a device or a directory is refused at once.


def test_a_fifo_planted_as_the_results_file_is_refused_without_waiting(cli: Cli, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(ITEM) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "results.jsonl")
    done = cli.run("batch", str(items), "--out", str(out))
    assert "FIFO" in _no_traceback(done, 2)
    with pytest.raises(OSError, match="FIFO"):
        run_batch([ITEM], out)


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_every_input_file_that_is_not_a_regular_file_gets_a_clear_error(cli: Cli, kind: str) -> None:
    odd = cli.tmp / "odd"
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "directory":
        odd.mkdir()
    else:
        odd = Path("/dev/zero")
    expected = {"fifo": "FIFO", "directory": "directory", "device": "device"}[kind]
    for args in (
        ["show", str(odd)],
        ["replay", str(odd)],
        ["prompt", "--config", str(odd), "hi"],
        ["prompt", "--mcp-config", str(odd), "hi"],
        *([["prompt", "--agent-log", str(odd), "hi"]] if kind != "device" else []),  # /dev/null is a fine log
    ):
        done = cli.run(*args)
        assert done.returncode != 0 and expected in done.stderr.decode(), (args, done.stderr)
        assert b"Traceback" not in done.stderr
    with pytest.raises(OSError, match=expected):
        tinyacp.JsonlJournal.read(odd)
    with pytest.raises(OSError, match=expected):
        run_batch(odd, cli.tmp / "out")


def test_a_file_that_is_not_regular_is_named_with_what_it_is_and_no_errno(cli: Cli) -> None:
    fifo = cli.tmp / "fifo"
    os.mkfifo(fifo)
    for args in (["show", str(fifo)], ["replay", str(fifo)], ["batch", str(fifo), "--out", str(cli.tmp / "o")]):
        err = _no_traceback(cli.run(*args), 2)
        assert f"{fifo}: a FIFO (named pipe), not a regular file" in err, (args, err)
        assert "Errno" not in err, (args, err)


def test_batch_says_a_missing_items_file_does_not_exist_and_escapes_a_name_that_is_not_utf8(cli: Cli) -> None:
    err = _no_traceback(cli.run("batch", "MISSING.jsonl", "--out", str(cli.tmp / "o")), 2)
    assert err.splitlines() == ["tinyacp: error: MISSING.jsonl: does not exist"]
    err = _no_traceback(cli.run("batch", os.fsdecode(b"caf\xe9-\xff.jsonl"), "--out", str(cli.tmp / "o")), 2)
    assert err.splitlines() == ["tinyacp: error: caf\\xe9-\\xff.jsonl: does not exist"]
    (cli.work / os.fsdecode(b"bad-\xff.jsonl")).write_bytes(b"not json\n")
    err = _no_traceback(cli.run("batch", os.fsdecode(b"bad-\xff.jsonl"), "--out", str(cli.tmp / "o")), 2)
    assert "bad-\\xff.jsonl: not a JSON object" in err
    (cli.work / "items").mkdir()
    err = _no_traceback(cli.run("batch", "items", "--out", str(cli.tmp / "o")), 2)
    assert err.splitlines() == ["tinyacp: error: items: a directory, not a regular file"]


def test_a_fifo_planted_as_the_session_index_is_refused_and_the_run_goes_on(cli: Cli) -> None:
    index = _index(cli)
    index.parent.mkdir(parents=True, mode=0o700)
    os.mkfifo(index)
    done = cli.run("prompt", "--agent", "demo", "hello")
    assert done.returncode == 0 and "FIFO" in done.stderr.decode()
    assert "FIFO" in _no_traceback(cli.run("sessions"), 2)
    assert "FIFO" in _no_traceback(cli.run("prompt", "--agent", "demo", "--continue", "hi"), 2)


# --------------------------------------------------------------------------------------------------------------
# 3 and 4. The batch's journal directory is checked; no two ids share a journal.


def test_a_symlink_planted_as_the_journal_directory_is_refused(cli: Cli, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "journals").symlink_to(elsewhere)
    with pytest.raises(OSError, match="symbolic link"):
        run_batch([ITEM], out)
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(ITEM) + "\n")
    assert "symbolic link" in _no_traceback(cli.run("batch", str(items), "--out", str(out)), 2)
    assert list(elsewhere.iterdir()) == []
    (out / "journals").unlink()
    (out / "journals").mkdir(mode=0o777)
    os.chmod(out / "journals", 0o777)
    with pytest.raises(OSError, match="others can write"):
        run_batch([ITEM], out)


def test_no_two_item_ids_share_a_journal_file(tmp_path: Path) -> None:
    from tinyacp.batch._items import journal_name

    hashed = journal_name("/x")
    ids = ["/x", hashed.removesuffix(".jsonl"), "x", "X", "a.b", "A-" + "0" * 16, "a-" + "0" * 16, "x.jsonl"]
    names = [journal_name(item).lower() for item in ids]  # lowered: as a file system that folds case sees them
    assert len(set(names)) == len(ids), names
    out = tmp_path / "out"
    items = [{"id": item, "prompt": "list"} for item in ids[:2]]
    summary = run_batch(items, out, cwd=tmp_path, agent="demo")
    assert summary.ok == 2
    journals = [record.journal for record in tinyacp.batch.read_results(out / "results.jsonl")]
    assert len(set(journals)) == 2


# --------------------------------------------------------------------------------------------------------------
# 5. Secrets that overlap are all gone, whatever their order.


@pytest.mark.parametrize("reverse", [False, True])
def test_overlapping_secrets_are_all_gone_from_the_journal(tmp_path: Path, reverse: bool) -> None:
    token, password = tinyacp.Secret("tokX"), tinyacp.Secret('pass"tokX')
    pairs: list[tuple[str, Any]] = [("token", token), ("password", password), ("plain", "pass")]
    meta = dict(reversed(pairs) if reverse else pairs)
    body = {"jsonrpc": "2.0", "id": 7, "method": "authenticate", "params": {"methodId": "k", "_meta": meta}}
    path = tmp_path / "j.jsonl"
    with tinyacp.JsonlJournal(path) as journal:
        journal.on_send(sent_line(body))
    data = path.read_bytes()
    assert b"tokX" not in data and b"pass\\" not in data
    (record,) = tinyacp.JsonlJournal.read(path)
    stored = json.loads(tinyacp.JsonlJournal.raw(record))["params"]["_meta"]
    assert stored == {"token": "<secret>", "password": "<secret>", "plain": "pass"}


# --------------------------------------------------------------------------------------------------------------
# 7. Nesting too deep, an unclosed quote: clear errors.


def test_json_and_toml_nested_too_deep_are_clear_errors(cli: Cli, tmp_path: Path) -> None:
    deep_json = "[" * 100_000 + "]" * 100_000
    items = tmp_path / "items.jsonl"
    items.write_text(deep_json + "\n")
    assert "nested too deep" in _no_traceback(cli.run("batch", str(items), "--out", str(tmp_path / "o")), 2)
    with pytest.raises(tinyacp.BatchItemError, match="nested too deep"):
        run_batch(items, tmp_path / "o")
    mcp = tmp_path / "mcp.json"
    mcp.write_text('{"mcpServers":' + deep_json + "}")
    assert "nested too deep" in _no_traceback(cli.run("prompt", "--mcp-config", str(mcp), "hi"), 2)
    config = tmp_path / "config.toml"
    config.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert "nested too deep" in _no_traceback(cli.run("prompt", "--config", str(config), "hi"), 2)
    config.write_text('[agents.mine]\ncommand = "demo \'unclosed"\n')
    err = _no_traceback(cli.run("prompt", "--config", str(config), "--agent", "mine", "hi"), 2)
    assert "agents.mine.command" in err and "closing quotation" in err


# --------------------------------------------------------------------------------------------------------------
# 10. A batch's agent name is checked before the first turn.


def test_a_mistyped_batch_agent_is_a_usage_error_with_did_you_mean_before_any_turn(cli: Cli, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(ITEM) + "\n")
    out = tmp_path / "out"
    err = _no_traceback(cli.run("batch", str(items), "--out", str(out), "--agent", "cluade"), 2)
    assert "did you mean 'claude'" in err
    assert not (out / "results.jsonl").exists() or (out / "results.jsonl").read_bytes() == b""
    items.write_text(json.dumps({**ITEM, "agent": "cluade"}) + "\n")
    err = _no_traceback(cli.run("batch", str(items), "--out", str(out)), 2)
    assert "did you mean 'claude'" in err and (out / "results.jsonl").read_bytes() == b""
    err = _no_traceback(cli.run("batch", str(items), "--out", str(out), "--cwd", str(tmp_path / "nowhere")), 2)
    assert "--cwd" in err
    items.write_text(json.dumps({**ITEM, "agent": "demo", "cwd": "nowhere"}) + "\n")
    err = _no_traceback(cli.run("batch", str(items), "--out", str(out), "--cwd", str(tmp_path)), 2)
    assert "'nowhere' is not a directory" in err and (out / "results.jsonl").read_bytes() == b""
    with pytest.raises(ValueError, match="not a directory"):
        run_batch([ITEM], out, agent="demo", cwd=tmp_path / "nowhere")


def test_a_batch_item_with_a_mistyped_agent_or_missing_cwd_names_its_line(cli: Cli, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    out = tmp_path / "out"
    for bad in ({"agent": "cluade"}, {"cwd": "nowhere"}):
        items.write_text(json.dumps({**ITEM, "id": "ok"}) + "\n" + json.dumps({**ITEM, "id": "bad", **bad}) + "\n")
        err = _no_traceback(cli.run("batch", str(items), "--out", str(out), "--cwd", str(tmp_path)), 2)
        assert "tinyacp: error: line 2: item 'bad':" in err, err


def _counting_demo(tmp_path: Path) -> tuple[str, Path]:
    """The demo agent as a command line that notes each start in a file: how many agents a batch started."""
    starts = tmp_path / "starts"
    script = tmp_path / "counting.py"
    script.write_text(
        f"import runpy, sys\nwith open({str(starts)!r}, 'a') as f:\n    f.write('start\\n')\n"
        "sys.argv = ['tinyacp.demo']\nrunpy.run_module('tinyacp.demo', run_name='__main__')\n"
    )
    return f"{sys.executable} {script}", starts


def _starts(starts: Path) -> int:
    return len(starts.read_text().splitlines()) if starts.exists() else 0


def test_a_batch_item_asking_a_mode_or_option_its_agent_does_not_offer_is_refused_before_any_turn(
    cli: Cli, tmp_path: Path
) -> None:
    agent, starts = _counting_demo(tmp_path)
    good: dict[str, Any] = {"id": "good", "prompt": "hi", "mode": "auto", "set": {"model": "demo-large"}}
    bad: list[dict[str, Any]] = [
        {"id": "m", "prompt": "hi", "mode": "autoo"},
        {"id": "o", "prompt": "hi", "set": {"modle": "demo-small"}},
        {"id": "v", "prompt": "hi", "set": {"model": "demo-larg"}},
        {"id": "n", "prompt": "hi", "model": "demo-smal"},
    ]
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(item) + "\n" for item in [good, *bad]))
    out = tmp_path / "out"
    err = _no_traceback(cli.run("batch", str(items), "--out", str(out), "--agent", agent), 2)
    lines = err.splitlines()
    assert "do not offer" not in err and "does not offer (they were not run)" in lines[0], err
    said = {line.split(":", 1)[0].strip(): line for line in lines[1:]}
    assert set(said) == {"item 'm' (line 2)", "item 'o' (line 3)", "item 'v' (line 4)", "item 'n' (line 5)"}, err
    assert "mode of agent" in said["item 'm' (line 2)"] and "did you mean 'auto'?" in said["item 'm' (line 2)"]
    assert "'modle'" in said["item 'o' (line 3)"] and "did you mean 'mode' or 'model'?" in said["item 'o' (line 3)"]
    assert "'demo-larg'" in said["item 'v' (line 4)"] and "did you mean 'demo-large'" in said["item 'v' (line 4)"]
    assert "model of agent" in said["item 'n' (line 5)"] and "did you mean 'demo-small'" in said["item 'n' (line 5)"]
    assert (out / "results.jsonl").read_bytes() == b"" and not list((out / "journals").iterdir())
    assert _starts(starts) == 1  # one probe for the one agent, no turn
    with pytest.raises(tinyacp.BatchItemError, match="did you mean 'auto'"):
        run_batch(items, out, agent=agent)
    assert _starts(starts) == 2 and (out / "results.jsonl").read_bytes() == b""
    # An iterable is read as turns finish: its first bad item stops new turns, as a malformed one does.
    with pytest.raises(tinyacp.BatchItemError, match="item 'm': mode of agent") as refused:
        run_batch([good, *bad], out, agent=agent, concurrency=1)
    assert "'o'" not in str(refused.value)
    assert [record.id for record in read_results(out / "results.jsonl")] == ["good"]


def test_a_batch_starts_no_extra_agent_when_no_item_asks_a_mode_or_option_and_probes_each_agent_once(
    cli: Cli, tmp_path: Path
) -> None:
    agent, starts = _counting_demo(tmp_path)
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": n, "prompt": "hi"}) + "\n" for n in range(3)))
    done = cli.run("batch", str(items), "--out", str(tmp_path / "plain"), "--agent", agent)
    _no_traceback(done, 0)
    assert _starts(starts) == 3
    items.write_text("".join(json.dumps({"id": n, "prompt": "hi", "mode": "auto"}) + "\n" for n in range(3)))
    _no_traceback(cli.run("batch", str(items), "--out", str(tmp_path / "modes"), "--agent", agent), 0)
    assert _starts(starts) == 3 + 1 + 3


def test_a_batch_whose_agent_cannot_be_probed_is_refused_with_what_happened(cli: Cli, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({**ITEM, "mode": "auto", "agent": "no-such-program-tinyacp-test"}) + "\n")
    err = _no_traceback(cli.run("batch", str(items), "--out", str(tmp_path / "out")), 2)
    assert "agent 'no-such-program-tinyacp-test' could not be asked which modes" in err
    assert "item 'one' (line 1)" in err and "SpawnError" in err
    items.write_text(
        json.dumps(
            {**ITEM, "mode": "auto", "agent": [sys.executable, "-c", f"import time; time.sleep(60)  # {cli.marker}"]}
        )
        + "\n"
    )
    err = _no_traceback(cli.run("batch", str(items), "--out", str(tmp_path / "out"), "--timeout", "1"), 2)
    assert "AgentTimeout" in err and (tmp_path / "out" / "results.jsonl").read_bytes() == b""
    assert not _running(f"import time; time.sleep(60)  # {cli.marker}")  # the probe's agent was torn down


def _running(command_part: str) -> list[int]:
    """Live processes whose command line holds ``command_part``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and command_part.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


def test_a_misspelled_item_field_is_kept_and_warned_about_once_with_did_you_mean(cli: Cli, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    lines = [
        {"id": 1, "prompt": "hi", "promt": "x", "modle": "y"},
        {"id": 2, "prompt": "hi", "promt": "z", "repo": "r"},
    ]
    items.write_text("".join(json.dumps(item) + "\n" for item in lines))
    done = cli.run("batch", str(items), "--out", str(tmp_path / "out"), "--agent", "demo")
    err = _no_traceback(done, 0)
    warned = [line for line in err.splitlines() if line.startswith("tinyacp: warning: ")]
    assert len(warned) == 2, err
    assert "'promt'" in warned[0] and "did you mean 'prompt'?" in warned[0]
    assert "'modle'" in warned[1] and "did you mean 'mode' or 'model'?" in warned[1]
    assert "repo" not in err
    from tinyacp.batch import ItemFieldWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_batch(lines, tmp_path / "lib", agent="demo")
    said = [str(w.message) for w in caught if issubclass(w.category, ItemFieldWarning)]
    assert len(said) == len(caught) == 2  # once per name
    assert "did you mean 'prompt'" in said[0] and "did you mean 'mode' or 'model'" in said[1]


# --------------------------------------------------------------------------------------------------------------
# 13. `show` of what is not a journal.


@pytest.mark.parametrize(
    "content", [b"", os.urandom(512), b'{"a": 1}\n[1, 2]\n', b"\n\n"], ids=["empty", "random", "json", "blank"]
)
def test_show_of_a_file_that_is_not_a_journal_exits_2_and_says_so(cli: Cli, content: bytes) -> None:
    path = cli.tmp / "not-a-journal"
    path.write_bytes(content)
    for fmt in ("text", "json"):
        assert "not a tinyacp journal" in _no_traceback(cli.run("show", "--format", fmt, str(path)), 2)


# --------------------------------------------------------------------------------------------------------------
# 14. A closed stdout ends a batch quietly.


def test_a_batch_whose_stdout_is_closed_ends_quietly_with_its_results_intact(cli: Cli, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": n, "prompt": "list"}) + "\n" for n in range(4)))
    out = tmp_path / "out"
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [*CLI, "batch", str(items), "--out", str(out), "--format", "json", "--concurrency", "1"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        cwd=cli.work,
        env=cli.env,
    )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        first = reader.readline()  # `| head -1`
    assert json.loads(first)["ok"] is True
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert b"Broken pipe" not in err and b"Traceback" not in err and b"Exception" not in err
    lines = (out / "results.jsonl").read_bytes().splitlines()
    assert lines and all(msgspec.json.decode(line)["id"] in range(4) for line in lines)


# --------------------------------------------------------------------------------------------------------------
# 15. config.toml: typed, unknown keys refused with "did you mean", a command line names a known agent.


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('defualt_agent = "demo"\n', "unknown key 'defualt_agent'; did you mean 'default_agent'?"),
        ('timeout = "soon"\n', "unknown key 'timeout'"),
        ('[agents.mine]\ncomand = "demo"\n', "unknown key 'agents.mine.comand'; did you mean 'command'?"),
        ("[agents.mine]\ncommand = []\n", "agents.mine: needs a command"),
        ('[agents.mine]\ncommand = ["x"]\nmode = 3\n', "agents.mine.mode: expected str"),
        ('[agents.mine]\ncommand = ["x"]\nsystem_prompt_mode = "sideways"\n', "agents.mine.system_prompt_mode"),
        ("default_agent = 7\n", "default_agent: expected str"),
    ],
)
def test_a_config_file_with_a_wrong_key_or_value_names_it_and_its_place(cli: Cli, text: str, expected: str) -> None:
    config = cli.tmp / "config.toml"
    config.write_text(text)
    assert expected in _no_traceback(cli.run("prompt", "--config", str(config), "hi"), 2)


def test_a_config_command_line_may_name_a_known_agent_as_the_agent_flag_does(cli: Cli) -> None:
    config = cli.tmp / "config" / "tinyacp" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('default_agent = "slow"\n[agents.slow]\ncommand = "demo --delay 0.01"\n')
    done = cli.run("prompt", "-q", "-y", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == cli.expected_reply()
    listed = cli.run("agents", "--format", "json")
    assert listed.returncode == 0 and "--delay 0.01" in listed.stdout.decode()


def test_writes_to_the_session_index_while_another_run_compacts_it_are_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tinyacp.cli.shared import _index
    from tinyacp.cli.shared._index import SessionIndex

    monkeypatch.setattr(_index, "_COMPACT_AT", 64 * 1024)  # a compaction every few dozen writes of each writer
    index = SessionIndex(tmp_path / "sessions.jsonl")
    errors: list[BaseException] = []

    def write(agent: str) -> None:
        try:
            for n in range(400):
                index.record(agent, tmp_path, f"{agent}-{n}-" + "p" * 600, None)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    # Compaction keeps the newest entries, so what is left of each writer is an unbroken run ending at its last
    # write: a gap, or a writer whose last write is missing, is a write lost.
    kept: dict[str, list[int]] = {}
    for entry in index.entries():
        kept.setdefault(entry.agent, []).append(int(entry.session_id.split("-")[1]))
    assert kept and (tmp_path / "sessions.jsonl").stat().st_size <= 2 * 64 * 1024
    for numbers in kept.values():
        assert numbers == list(range(399, 399 - len(numbers), -1))


# --------------------------------------------------------------------------------------------------------------
# 8, 9. Text that is not UTF-8 on the command line or typed in a chat; a malformed answer to /set.


def test_text_that_is_not_utf8_on_the_command_line_is_a_clean_usage_error(cli: Cli) -> None:
    bad_dir = os.fsencode(cli.work) + b"/bad\xff"
    os.mkdir(bad_dir)
    for args in (
        [b"prompt", b"\xff\xfehello"],
        [b"prompt", b"--system-prompt", b"be \xff brief", b"hello"],
        [b"prompt", b"--cwd", bad_dir, b"hello"],
        [b"prompt", b"--mode", b"\xc3(", b"hello"],
    ):
        done = subprocess.run(
            [*map(os.fsencode, CLI), *args], capture_output=True, cwd=cli.work, env=cli.env, timeout=30, check=False
        )
        assert "not UTF-8 text" in _no_traceback(done, 2), args
    done = subprocess.run(
        [*CLI, "prompt", "hello"], capture_output=True, cwd=bad_dir, env=cli.env, timeout=30, check=False
    )
    assert "the working directory" in _no_traceback(done, 2)


def test_a_chat_reports_a_line_that_is_not_utf8_and_a_malformed_set_answer_and_goes_on(cli: Cli) -> None:
    from helpers.cli import SESSION_WITH_SETTINGS, Terminal, lines_received, name_scripted_agent, steps_with_settings

    steps = steps_with_settings(
        [
            {"op": "expect", "method": "session/set_config_option"},
            {"op": "reply", "result": {"configOptions": "not a list"}},
            {"op": "expect", "method": "session/set_mode"},
            {"op": "reply", "result": {}},
            {"op": "expect", "method": "session/close"},
            {"op": "reply", "result": {}},
        ],
        {"sessionCapabilities": {"close": {}}},
    )
    assert SESSION_WITH_SETTINGS["sessionId"] == "s1"
    name_scripted_agent(cli, steps)
    terminal = Terminal(cli, "chat", "--agent", "scripted", "--no-journal")
    terminal.wait_for(b"you> ")
    terminal.send(b"caf\xe9 \xff\n")
    terminal.wait_for(b"not UTF-8 text")
    terminal.send(b"/set effort high\n")
    terminal.wait_for(b"was malformed")
    terminal.send(b"/mode plan\n")
    terminal.wait_for(b"mode: plan")
    # Ctrl-D only at the prompt: typed while the chat is busy, the terminal (back in line mode) turns it into a
    # NUL byte that the next prompt reads as a character, and the chat never sees the end of its input.
    terminal.wait_for(b"you> ", count=4)
    terminal.send(b"\x04")
    assert terminal.finish() == 0
    assert b"Traceback" not in terminal.output and b"session s1 closed" in terminal.output
    methods = [m.get("method") for m in lines_received(cli)]
    assert methods == ["initialize", "session/new", "session/set_config_option", "session/set_mode", "session/close"]


# --------------------------------------------------------------------------------------------------------------
# 11, 12. A program that does not speak ACP is named for what it is; a prompt too large is refused before start.


@pytest.mark.parametrize(
    ("command", "status", "expected"),
    [
        ("cat", 1, "it writes back what it reads (as cat does)"),
        ("true", 1, "ended before answering initialize (exit code 0) and wrote nothing on stdout"),
        ("/nonexistent/agent", 7, "/nonexistent/agent does not exist"),
        ("/", 7, "/ is a directory, not a program"),
    ],
)
def test_a_program_that_does_not_speak_acp_is_said_to_be_what_it_is(
    cli: Cli, command: str, status: int, expected: str
) -> None:
    done = cli.run("prompt", "--no-journal", "--startup-timeout", "20", "--agent-command", command, "hi")
    err = _no_traceback(done, status)
    assert expected in err and "not found on PATH" not in err and "Method not found (code" not in err


def test_a_relative_agent_path_missing_from_the_cwd_option_is_said_to_be_looked_up_there(cli: Cli) -> None:
    # The program exists beside the caller, not under --cwd, where the agent starts: the error must say where it looked.
    (cli.work / "bin").mkdir()
    agent = cli.work / "bin" / "agent"
    agent.write_text(f"#!{sys.executable}\n")
    agent.chmod(0o755)
    (cli.work / "elsewhere").mkdir()
    done = cli.run("prompt", "--no-journal", "--cwd", "elsewhere", "--agent-command", "bin/agent", "hi")
    err = _no_traceback(done, 7)
    assert "bin/agent does not exist (a relative path: looked up from the agent's working directory" in err, err
    assert "#! line" not in err


def test_a_prompt_larger_than_one_message_is_refused_before_the_agent_starts(cli: Cli) -> None:
    started = cli.tmp / "started"
    agent = f"{sys.executable} -c \"open({str(started)!r}, 'w')\""
    prompt = b"x" * (20 * 1024 * 1024)
    done = cli.run("prompt", "--no-journal", "--agent-command", agent, "-", input=prompt)
    err = _no_traceback(done, 2)
    assert "the prompt is" in err and "--max-message-bytes" in err and "agent is honest" not in err
    assert not started.exists()


def test_an_attachment_that_is_a_fifo_is_refused_without_waiting(cli: Cli) -> None:
    fifo = cli.tmp / "fifo.txt"
    os.mkfifo(fifo)
    assert "FIFO" in _no_traceback(cli.run("prompt", "--file", str(fifo), "hi"), 2)


@pytest.mark.parametrize(
    "args",
    [
        ["--max-line", "99999999999999999999999G"],
        ["--max-line", "2G"],
        ["--timeout", "1e308"],
        ["--kill-grace", "1e300"],
        ["--max-updates", "9" * 5000],
    ],
)
def test_a_limit_or_deadline_too_large_to_honour_is_a_usage_error(cli: Cli, args: list[str]) -> None:
    done = cli.run("prompt", "--no-journal", *args, "hi")
    assert "argument " + args[0] in _no_traceback(done, 2)


def test_a_batch_concurrency_too_large_to_honour_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(ITEM) + "\n")
    done = cli.run("batch", str(items), "--out", str(tmp_path / "out"), "--concurrency", "1000000000000")
    assert "--concurrency" in _no_traceback(done, 2)
