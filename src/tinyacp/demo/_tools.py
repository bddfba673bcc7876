"""The tool call of every ordinary turn: ``Read`` (or ``Bash``, see ``_bash.py``) on the session's directory,
announced, asked for with ``session/request_permission`` (but a read in mode ``auto``), run; and what it reads: the
regular files of the directory, with their sizes and line counts."""

from __future__ import annotations

import os

from ._wire import plural, text, tool_status

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._agent import DemoAgent
    from ._turn import Turn
    from ._wire import JsonObject

PERMISSION_OPTIONS: list[JsonObject] = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
_OPTION_KINDS = {option["optionId"]: option["kind"] for option in PERMISSION_OPTIONS}

# read() size: one pipe buffer on Linux, as the agent reads its input.
_READ_SIZE = 65536


class FileRow:
    """One file of a listing."""

    def __init__(self, name: str, size: int, lines: int) -> None:
        self.name = name
        self.size = size
        self.lines = lines


class Listing:
    """What a tool call read: the files, or why not (``error``), or that it was not allowed (``refused``)."""

    def __init__(self, *, refused: bool = False) -> None:
        self.rows: list[FileRow] = []
        self.skipped = 0
        self.error: str | None = None
        self.refused = refused


def use_tool(agent: DemoAgent, turn: Turn, session_id: str, name: str) -> Listing | None:
    """A ``Read`` or ``Bash`` tool call on the cwd, in ``session_id``: announced, asked for (but a read in mode
    ``auto``), run. Bash runs nothing: the agent lists the files itself, as Read does.

    Returns the listing (refused if rejected), or None if the turn got cancelled.
    """
    cwd = turn.session.cwd
    tool_call_id = agent.new_tool_call_id()
    if name == "Bash":
        call = {"toolCallId": tool_call_id, "title": f"ls -l {cwd}", "name": name, "kind": "execute"}
    else:
        call = {"toolCallId": tool_call_id, "title": f"Read files in {cwd}", "name": name, "kind": "read"}
    announce = {"sessionUpdate": "tool_call", **call, "status": "pending", "locations": [{"path": cwd}]}
    if not agent.emit(turn, announce, session_id):
        return None
    asks = name != "Read" or turn.session.mode != "auto"
    decision = ask_permission(agent, turn, session_id, {**call, "status": "pending"}) if asks else "allow"
    if decision is None:
        return None
    if decision == "reject":
        return Listing(refused=True) if agent.emit(turn, tool_status(tool_call_id, "failed"), session_id) else None
    if not agent.emit(turn, tool_status(tool_call_id, "in_progress"), session_id):
        return None
    listing = list_files(cwd)
    result = tool_status(tool_call_id, "failed" if listing.error else "completed")
    result["content"] = [{"type": "content", "content": text(table(listing))}]
    return listing if agent.emit(turn, result, session_id) else None


def ask_permission(agent: DemoAgent, turn: Turn, session_id: str, tool_call: JsonObject) -> str | None:
    """Asks ``session/request_permission`` for ``tool_call`` in ``session_id`` (the turn's, or a child's).

    Returns:
        "allow" or "reject", or None when the turn was cancelled (by session/cancel or the outcome).
    """
    params = {"sessionId": session_id, "toolCall": tool_call, "options": PERMISSION_OPTIONS}
    answer = agent.ask(turn, "session/request_permission", params)
    return None if answer is None else permission_decision(answer)


def permission_decision(answer: JsonObject) -> str | None:
    """Maps a permission answer to "allow", "reject" or None (cancelled)."""
    result = answer.get("result")
    outcome = result.get("outcome") if isinstance(result, dict) else None
    if not isinstance(outcome, dict):
        return "reject"  # an error answer or a malformed one: the tool must not run
    if outcome.get("outcome") == "cancelled":
        return None
    kind = _OPTION_KINDS.get(outcome.get("optionId"))
    return "allow" if kind is not None and kind.startswith("allow") else "reject"


def list_files(cwd: str) -> Listing:
    """Regular files directly in ``cwd``, sorted by name, with size and line count; skips unreadable ones."""
    listing = Listing()
    try:
        with os.scandir(cwd) as entries:
            names = sorted(entry.name for entry in entries if _is_regular_file(entry))
    except OSError as error:
        listing.error = f"cannot list {cwd}: {error.strerror}"
        return listing
    for name in names:
        try:
            size, lines = _measure(os.path.join(cwd, name))
        except OSError:
            listing.skipped += 1
            continue
        listing.rows.append(FileRow(_printable(name), size, lines))
    return listing


def _is_regular_file(entry: os.DirEntry[str]) -> bool:
    """True for a regular file, or a symlink to one; False for anything we cannot even stat."""
    try:
        return entry.is_file()
    except OSError:
        return False


def _measure(path: str) -> tuple[int, int]:
    """Size in bytes and line count: newlines, plus one for a last line without a newline."""
    size = newlines = 0
    last = b"\n"
    with open(path, "rb") as file:
        while block := file.read(_READ_SIZE):
            size += len(block)
            newlines += block.count(b"\n")
            last = block[-1:]
    return size, newlines + (last != b"\n")


def _printable(name: str) -> str:
    """A file name fit for one line of text: undecodable bytes and control characters become U+FFFD."""
    name = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(char if char.isprintable() else "\ufffd" for char in name)


def table(listing: Listing) -> str:
    """The listing as the tool call's content: a tab-separated table, or the error."""
    if listing.error is not None:
        return listing.error
    lines = ["bytes\tlines\tname"]
    lines += [f"{row.size}\t{row.lines}\t{row.name}" for row in listing.rows]
    return "\n".join(lines)


def summary(cwd: str, listing: Listing) -> str:
    """The listing as the reply tells it."""
    if listing.error is not None:
        return f"I could not read the files: {listing.error}.\n"
    said = f"I read {plural(len(listing.rows), 'file')} in {cwd}:\n"
    said += "".join(f"- {row.name}: {plural(row.size, 'byte')}, {plural(row.lines, 'line')}\n" for row in listing.rows)
    if listing.skipped:
        said += f"I could not read {listing.skipped} more.\n"
    return said
