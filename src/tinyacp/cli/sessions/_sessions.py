"""``tinyacp sessions``: the sessions this machine ran (the index ``--continue`` reads), and with ``--agent`` the
agent's own list (``session/list``) beside them, each page of it within ``--timeout``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from ..._client import Client
from ..._errors import AgentExited, TinyAcpError
from ..._observer import BaseObserver
from ..._options import Options
from ..agents._load import load_config
from ..agents._resolve import AgentSpec, resolve_agent
from ..shared._display import one_line
from ..shared._exit import UsageProblem
from ..shared._index import SessionIndex
from ..shared._text import working_directory

__all__ = ["cmd_sessions"]


def cmd_sessions(args: argparse.Namespace) -> int:
    """``tinyacp sessions``: the sessions this machine ran (with their journals), and with ``--agent`` the
    agent's own list (``session/list``) beside them."""
    agent = _named_agent(args)
    cwd = working_directory(args.cwd) if args.cwd is not None else None
    try:
        entries = SessionIndex().entries(agent.key if agent is not None else None, cwd)[: args.limit]
    except OSError as exc:
        raise UsageProblem(f"cannot read the index of sessions: {exc.filename}: {exc.strerror}") from None
    listed, problem = _agent_sessions(agent, cwd, args.timeout) if agent is not None else (None, None)
    if listed is not None:
        listed = listed[: args.limit]
    if args.format == "json":
        document = {
            "sessions": [dataclasses.asdict(entry) for entry in entries],
            "agent_sessions": listed,
            "agent_error": problem,
        }
        print(json.dumps(document, ensure_ascii=True, indent=2))
        return 0
    if not entries:
        print("no sessions yet" + (" of this agent" if agent else "") + (" in this directory" if cwd else ""))
    for entry in entries:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.time))
        print(f"{when}  {one_line(entry.agent, 30)}  {one_line(entry.session_id, 60)}  {one_line(entry.cwd, 80)}")
        if entry.title:
            print(f"    {one_line(entry.title, 100)}")
        if entry.journal:
            print(f"    journal: {one_line(entry.journal, 200)}")
    if agent is not None:
        print(f"\n{agent.name}'s own list (session/list): " + (one_line(problem, 300) if problem else ""))
        ran = {entry.session_id for entry in entries}
        for item in listed or []:
            mark = "  (ran here)" if item["session_id"] in ran else ""
            title = f"  {one_line(item['title'], 60)}" if item["title"] else ""
            print(f"  {one_line(item['session_id'], 60)}{title}  {one_line(item['updated_at'] or '', 30)}{mark}")
    return 0


def _named_agent(args: argparse.Namespace) -> AgentSpec | None:
    """The agent ``--agent`` or ``--agent-command`` names; None when neither is given (this machine's list only)."""
    if args.agent is None and args.agent_command is None:
        return None
    return resolve_agent(args.agent, load_config(args.config), command=args.agent_command)


_LIST_PAGES = 10
"""``session/list`` pages read at most: an agent cannot make ``tinyacp sessions`` read for ever."""


def _agent_sessions(
    agent: AgentSpec, cwd: Path | None, timeout: float
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The agent's own sessions (in ``cwd`` when given), or why there are none to show."""
    env = {**os.environ, **agent.env} if agent.env else None
    found: list[dict[str, Any]] = []
    try:
        with Client(Options(command=agent.command, cwd=cwd, env=env, observer=BaseObserver(), stderr="tail")) as c:
            init = c.initialize(timeout=timeout)
            if "list" not in init.agent_capabilities.session_capabilities:
                return None, "the agent does not offer session/list"
            cursor = None
            for _ in range(_LIST_PAGES):
                page = c.list_sessions(cwd, cursor, timeout=timeout)
                found += [
                    {"session_id": i.session_id, "cwd": i.cwd, "title": i.title, "updated_at": i.updated_at}
                    for i in page.sessions
                ]
                cursor = page.next_cursor
                if cursor is None:
                    break
    except TinyAcpError as exc:
        return None, one_line(exc.message if isinstance(exc, AgentExited) else str(exc), 300)
    return found, None
