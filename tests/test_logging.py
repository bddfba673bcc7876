"""What the client does goes to the ``tinyacp`` loggers: the agent started and reaped (``tinyacp.process``), each
call and its answer, deadlines, cancels, failures and closes (``tinyacp.client``), each permission decision
(``tinyacp.permissions``). Never a secret, the agent's arguments, an update or a line's content, and nothing at all
on a program that configured no logging.

Every test that goes through ``make_client`` runs against both clients.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import MakeClient, MakeScripted, Recorder, chunk, end_turn, handshake

SECRET = "s3cr3t-Value-9f1c"


def ask(request_id: int, title: str, kind: str) -> dict[str, Any]:
    """A scripted ``session/request_permission`` step; the agent waits for the answer."""
    options = [
        {"optionId": "yes", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    ]
    tool_call = {"toolCallId": f"call_{request_id}", "title": title, "kind": kind, "status": "pending"}
    params = {"sessionId": "s1", "toolCall": tool_call, "options": options}
    return {"op": "request", "method": "session/request_permission", "id": request_id, "params": params}


def records(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == logger]


def test_a_turn_logs_the_start_the_calls_the_decisions_and_the_teardown(
    make_client: MakeClient, scripted: MakeScripted, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tinyacp")
    agent = scripted(
        [
            *handshake(),
            ask(7, "Read notes.txt", "read"),
            ask(8, "Delete everything", "delete"),
            {"op": "update", "update": chunk("done")},
            end_turn(),
        ]
    )
    policy = tinyacp.PermissionPolicy(kinds=["read"])
    client = make_client(command=agent.argv, observer=Recorder(), policy=policy, timeout=20)
    client.initialize()
    client.new_session("/")
    client.prompt("s1", "go")
    client.close()

    process = records(caplog, "tinyacp.process")
    assert process[0] == f"started {agent.argv[0]} as pid {client.pid}"
    assert process[-1].startswith(f"pid {client.pid} reaped (")
    calls = records(caplog, "tinyacp.client")
    answered = [message.split(" (id")[0] for message in calls if " answered in " in message]
    assert answered == ["initialize", "session/new", "session/prompt"]
    assert any(message.startswith("closing:") for message in calls)
    assert records(caplog, "tinyacp.permissions") == [
        "session s1: read 'Read notes.txt' (unnamed): allowed_once by policy (the policy allows it)",
        "session s1: delete 'Delete everything' (unnamed): rejected by default-reject"
        " (neither the observer nor the policy allowed it)",
    ]


def test_a_timeout_that_tears_the_agent_down_is_logged(
    make_client: MakeClient, scripted: MakeScripted, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tinyacp")
    agent = scripted([*handshake(), {"op": "wait_eof"}])
    client = make_client(command=agent.argv, observer=Recorder(), cancel_grace=0.2)
    client.initialize()
    client.new_session("/")

    with pytest.raises(tinyacp.AgentTimeout):
        client.prompt("s1", "go", timeout=0.2)

    calls = records(caplog, "tinyacp.client")
    assert "the prompt's deadline passed: session/cancel sent, 0.2 s of grace for the answer" in calls
    assert f"the call ended with AgentTimeout: tearing the agent (pid {client.pid}) down" in calls
    assert records(caplog, "tinyacp.process")[-1].startswith(f"pid {client.pid} reaped")


def test_the_logs_hold_no_secret_no_argument_and_no_update(
    make_client: MakeClient, scripted: MakeScripted, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tinyacp")
    flood = [{"op": "update", "update": chunk(f"part {n} {SECRET}")} for n in range(200)]
    agent = scripted([*handshake(), *flood, end_turn()])
    command = [*agent.argv, f"--token={SECRET}"]  # the scripted agent ignores arguments past its log
    client = make_client(command=command, observer=Recorder(), env={"API_KEY": SECRET, "PATH": "/usr/bin:/bin"})
    client.initialize(meta={"auth": tinyacp.Secret(SECRET)})
    client.new_session("/", meta={"token": tinyacp.Secret(SECRET)})
    result = client.prompt("s1", "go", meta={"token": tinyacp.Secret(SECRET)})
    client.close()

    assert result.chunk_count == 200
    logged = [record.getMessage() for record in caplog.records]
    assert logged and not [message for message in logged if SECRET in message]
    assert len(logged) < 20  # a few lines for the whole turn: none per update


def test_a_program_that_configures_no_logging_sees_nothing_of_it(tmp_path: Path, scripted: MakeScripted) -> None:
    # The agent ignores SIGTERM, so the teardown logs a WARNING (the SIGKILL): Python's last resort would print it.
    agent = scripted([{"op": "ignore_sigterm"}, *handshake()[:2], {"op": "hang"}])
    program = textwrap.dedent(
        f"""
        import sys, tinyacp
        {{configure}}
        options = tinyacp.Options(command={agent.argv!r}, observer=tinyacp.BaseObserver(), kill_grace=0.2)
        with tinyacp.Client(options) as client:
            client.initialize(timeout=20)
        """
    )

    def run(configure: str) -> str:
        code = program.replace("{configure}", configure)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
        return done.stderr

    assert run("") == ""
    shown = run("import logging; logging.basicConfig(level=logging.WARNING)")  # the same run, logging configured
    assert "WARNING:tinyacp.process:the group of pid" in shown and "SIGKILL" in shown


def test_logging_costs_a_stream_of_updates_one_check_per_call_not_one_per_update(
    scripted: MakeScripted, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tinyacp")
    flood = [{"op": "update", "update": chunk(".")} for _ in range(300)]
    agent = scripted([*handshake(), *flood, end_turn()])
    checked: list[str] = []
    original = logging.Logger.isEnabledFor

    def counting(self: logging.Logger, level: int) -> bool:
        checked.append(self.name)
        return original(self, level)

    with tinyacp.Client(tinyacp.Options(command=agent.argv, observer=Recorder(), timeout=20)) as client:
        client.initialize()
        client.new_session("/")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(logging.Logger, "isEnabledFor", counting)
            assert client.prompt("s1", "go").chunk_count == 300
    assert 0 < len(checked) < 10  # the call's own few lines, whatever the number of updates


def test_a_cancelled_task_logs_the_cancel_and_the_teardown(
    scripted: MakeScripted, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tinyacp")
    agent = scripted([*handshake(), {"op": "update", "update": chunk("working")}, {"op": "wait_eof"}])
    recorder = Recorder()

    async def main() -> int:
        options = tinyacp.Options(command=agent.argv, observer=recorder, timeout=20)
        async with tinyacp.AsyncClient(options) as client:
            await client.initialize()
            await client.new_session("/")
            task = asyncio.create_task(client.prompt("s1", "go"))
            while not recorder.updates:  # the turn is under way
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return client.pid

    pid = asyncio.run(asyncio.wait_for(main(), 30))
    assert f"the awaiting task was cancelled: session/cancel, then the agent (pid {pid}) is torn down" in records(
        caplog, "tinyacp.client"
    )
    assert records(caplog, "tinyacp.process")[-1].startswith(f"pid {pid} reaped")
