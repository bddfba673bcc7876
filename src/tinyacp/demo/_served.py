"""``with-read``, ``with-write``, ``with-terminal``: the work goes through the client's files and terminals when the
client offers them (``fs.readTextFile``, ``fs.writeTextFile``, ``terminal``), as kimi-cli and fast-agent do, and the
agent acts itself when it does not; the reply says which.

- ``with-read``: the ``Read`` tool call reads each file of the cwd with ``fs/read_text_file`` (else opens them).
- ``with-write``: a ``Write`` tool call (kind edit, a diff of ``demo-notes.md``) asks permission, then writes the
  summary of the files to ``<cwd>/demo-notes.md`` with ``fs/write_text_file`` (else writes it itself).
- ``with-terminal``: a ``Bash`` tool call (kind execute, ``ls -l <cwd>``) asks permission, then runs it in a
  client's terminal (``terminal/create``, the terminal embedded in the tool call, ``wait_for_exit``, ``output``,
  ``release``), else with ``subprocess`` itself.

An error answer (the client's rules refused it) is told in the reply, and nothing is done instead.
"""

from __future__ import annotations

import os
import subprocess

from ._tools import FileRow, Listing, ask_permission, list_files, summary, use_tool
from ._wire import plural, tool_status

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._agent import DemoAgent
    from ._turn import Turn
    from ._wire import JsonObject

NOTES = "demo-notes.md"
"""The file ``with-write`` writes in the session's directory."""

_OUTPUT_LIMIT = 65536


def work(agent: DemoAgent, turn: Turn) -> Listing | None:
    """The turn's work with the served words it has: read, then write, then run. None once it is cancelled."""
    session_id = turn.session.session_id
    listing = _read(agent, turn) if "read" in turn.extras else use_tool(agent, turn, session_id, "Read")
    if listing is None:
        return None
    if "write" in turn.extras and not listing.refused and not _write(agent, turn, listing):
        return None
    if "terminal" in turn.extras and not _run(agent, turn):
        return None
    return listing


def _result(answer: JsonObject) -> JsonObject:
    result = answer.get("result")
    return result if isinstance(result, dict) else {}


def _error(answer: JsonObject) -> str | None:
    error = answer.get("error")
    if error is None and isinstance(answer.get("result"), dict):
        return None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message) if message else "an error"


def _tool(agent: DemoAgent, turn: Turn, call: JsonObject, locations: list[JsonObject]) -> str | None:
    """Announces the tool call and asks permission: "allow", "reject", or None once the turn is cancelled."""
    update = {"sessionUpdate": "tool_call", **call, "status": "pending", "locations": locations}
    if not agent.emit(turn, update):
        return None
    asks = call["kind"] != "read" or turn.session.mode != "auto"
    decision = ask_permission(agent, turn, turn.session.session_id, {**call, "status": "pending"}) if asks else "allow"
    if decision == "reject" and not agent.emit(turn, tool_status(call["toolCallId"], "failed")):
        return None
    return decision


def _read(agent: DemoAgent, turn: Turn) -> Listing | None:
    cwd = turn.session.cwd
    call = {"toolCallId": agent.new_tool_call_id(), "title": f"Read files in {cwd}", "name": "Read", "kind": "read"}
    decision = _tool(agent, turn, call, [{"path": cwd}])
    if decision is None:
        return None
    if decision == "reject":
        return Listing(refused=True)
    if not agent.emit(turn, tool_status(call["toolCallId"], "in_progress")):
        return None
    if "fs.readTextFile" not in agent.features:
        turn.notes.append("I read the files myself: this client serves no reads.\n")
        listing: Listing | None = list_files(cwd)
    else:
        listing = _read_through_client(agent, turn, cwd)
    if listing is None:
        return None
    done = tool_status(call["toolCallId"], "failed" if listing.error else "completed")
    return listing if agent.emit(turn, done) else None


def _read_through_client(agent: DemoAgent, turn: Turn, cwd: str) -> Listing | None:
    listing = Listing()
    try:
        with os.scandir(cwd) as entries:
            names = sorted(entry.name for entry in entries if entry.is_file(follow_symlinks=False))
    except OSError as error:
        listing.error = f"cannot list {cwd}: {error.strerror}"
        return listing
    refused: list[str] = []
    for name in names:
        params = {"sessionId": turn.session.session_id, "path": os.path.join(cwd, name)}
        answer = agent.ask(turn, "fs/read_text_file", params)
        if answer is None:
            return None
        problem = _error(answer)
        if problem is not None:
            listing.skipped += 1
            refused.append(f"{name} ({problem})")
            continue
        content = str(answer["result"].get("content", ""))
        lines = content.count("\n") + (not content.endswith("\n") and content != "")
        listing.rows.append(FileRow(name, len(content.encode("utf-8", "surrogatepass")), lines))
    said = f"I read {plural(len(listing.rows), 'file')} through the client"
    turn.notes.append(said + (f"; it did not serve {', '.join(refused)}" if refused else "") + ".\n")
    return listing


def _write(agent: DemoAgent, turn: Turn, listing: Listing) -> bool:
    """Writes the summary to ``demo-notes.md``; False once the turn is cancelled."""
    cwd = turn.session.cwd
    target = os.path.join(cwd, NOTES)
    content = summary(cwd, listing)
    call_id = agent.new_tool_call_id()
    call = {"toolCallId": call_id, "title": f"Write {target}", "name": "Write", "kind": "edit"}
    decision = _tool(agent, turn, call, [{"path": target}])
    if decision is None:
        return False
    if decision == "reject":
        turn.notes.append(f"I was not allowed to write {NOTES}.\n")
        return True
    diff = {"type": "diff", "path": target, "oldText": None, "newText": content}
    if not agent.emit(turn, {**tool_status(call_id, "in_progress"), "content": [diff]}):
        return False
    if "fs.writeTextFile" in agent.features:
        answer = agent.ask(
            turn, "fs/write_text_file", {"sessionId": turn.session.session_id, "path": target, "content": content}
        )
        if answer is None:
            return False
        problem = _error(answer)
        note = (
            f"The client did not write {NOTES}: {problem}.\n" if problem else f"I wrote {NOTES} through the client.\n"
        )
    else:
        try:
            with open(target, "w", encoding="utf-8") as file:
                file.write(content)
        except OSError as error:
            problem = error.strerror or str(error)
            note = f"I could not write {NOTES}: {problem}.\n"
        else:
            problem = None
            note = f"I wrote {NOTES} myself: this client serves no writes.\n"
    turn.notes.append(note)
    return agent.emit(turn, tool_status(call_id, "failed" if problem else "completed"))


def _run(agent: DemoAgent, turn: Turn) -> bool:
    """Runs ``ls -l <cwd>``; False once the turn is cancelled."""
    cwd = turn.session.cwd
    call_id = agent.new_tool_call_id()
    call = {"toolCallId": call_id, "title": f"ls -l {cwd}", "name": "Bash", "kind": "execute"}
    decision = _tool(agent, turn, call, [{"path": cwd}])
    if decision is None:
        return False
    if decision == "reject":
        turn.notes.append("I was not allowed to run ls -l.\n")
        return True
    if "terminal" in agent.features:
        outcome = _run_in_terminal(agent, turn, call_id, cwd)
        if outcome is None:
            return False
        ok, note = outcome
    else:
        try:
            done = subprocess.run(["ls", "-l", cwd], capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            ok, note = False, f"I could not run ls -l: {error}.\n"
        else:
            lines = plural(len(done.stdout.splitlines()), "line")
            ok, note = (
                done.returncode == 0,
                f"I ran ls -l myself (this client has no terminals): exit {done.returncode}, {lines}.\n",
            )
    turn.notes.append(note)
    return agent.emit(turn, tool_status(call_id, "completed" if ok else "failed"))


def _run_in_terminal(agent: DemoAgent, turn: Turn, call_id: str, cwd: str) -> tuple[bool, str] | None:
    """``ls -l`` in the client's terminal: created, embedded, waited for, read, released."""
    session_id = turn.session.session_id
    params = {
        "sessionId": session_id,
        "command": "ls",
        "args": ["-l", cwd],
        "cwd": cwd,
        "outputByteLimit": _OUTPUT_LIMIT,
    }
    answer = agent.ask(turn, "terminal/create", params)
    if answer is None:
        return None
    problem = _error(answer)
    if problem is not None:
        return False, f"The client did not run ls -l: {problem}.\n"
    terminal = {"sessionId": session_id, "terminalId": answer["result"].get("terminalId")}
    embedded = {"type": "terminal", "terminalId": terminal["terminalId"]}
    if not agent.emit(turn, {**tool_status(call_id, "in_progress"), "content": [embedded]}):
        return None
    exited = agent.ask(turn, "terminal/wait_for_exit", terminal)
    output = agent.ask(turn, "terminal/output", terminal) if exited is not None else None
    released = agent.ask(turn, "terminal/release", terminal) if output is not None else None
    if exited is None or output is None or released is None:
        return None
    status = _result(exited)
    code, signal = status.get("exitCode"), status.get("signal")
    result = _result(output)
    lines = plural(len(str(result.get("output", "")).splitlines()), "line")
    ended = f"ended by {signal}" if signal else f"exit {code}"
    return code == 0, f"I ran ls -l in the client's terminal: {ended}, {lines}.\n"
