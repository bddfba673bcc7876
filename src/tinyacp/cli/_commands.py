"""The ``tinyacp`` subcommands that talk to agents or read the machine's state: ``prompt``, ``chat``, ``probe``,
``sessions``, ``agents`` and ``show``.

Imported when one of them runs, never for parsing: ``tinyacp --help`` and a usage error start without the client,
the display or the config reader.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from .._client import Client
from .._errors import AgentExited, AuthRequired, RequestError, TinyAcpError
from .._limits import TransferLimits
from .._messages import Initialize, SystemPrompt
from .._observer import BaseObserver
from .._options import Options
from ..reader import ReaderLimits
from .agents._explain import explain, stderr_lines
from .agents._offers import InitializeAnswer, auth_method_line, initialize_report, session_capability_names, yes
from .agents._resolve import AgentSettings, AgentSpec, Config, load_config, resolve_agent
from .agents._session import SessionPlan, open_session, raw_auth_methods
from .run._attachments import Attachment, read_attachment
from .run._mcp import McpConfigError, read_mcp_config
from .run._prompt import PromptSettings, run_prompt
from .shared._dirs import UnsafeDirectory, journal_dir, new_private_file, private_dir
from .shared._display import isatty, one_line, print_error, sanitize
from .shared._exit import OUTCOME_WORDS, Exit, SettingUnavailable, UsageProblem
from .shared._features import COMMAND_FEATURES, permission_policy, providers_of, rule_notes
from .shared._index import SessionIndex
from .shared._text import text_argument, utf8_or_escaped

__all__ = ["cmd_agents", "cmd_chat", "cmd_probe", "cmd_prompt", "cmd_sessions", "cmd_show"]

_DEFAULT_LIMITS = TransferLimits()


def _config(args: argparse.Namespace) -> Config:
    return load_config(args.config)


def _agent(args: argparse.Namespace) -> AgentSpec:
    return resolve_agent(args.agent, _config(args), command=args.agent_command)


def _cwd(args: argparse.Namespace) -> Path:
    try:
        cwd = Path(args.cwd).resolve()
    except OSError as exc:  # the working directory was removed under us
        raise UsageProblem(f"the working directory cannot be used: {exc.strerror or exc}") from None
    if not cwd.is_dir():
        raise UsageProblem(f"--cwd {utf8_or_escaped(args.cwd)}: not a directory")
    what = "--cwd" if args.cwd != "." else "the working directory"
    text_argument(f"{what} {utf8_or_escaped(str(cwd))}: its name", str(cwd), "ACP sends the directory as text")
    return cwd


def _prompt_text(words: list[str]) -> str:
    if words == ["-"]:
        if isatty(sys.stdin):  # a person at a terminal would otherwise wait on a silent command
            print("tinyacp: reading the prompt from stdin (end it with Ctrl-D)", file=sys.stderr, flush=True)
        try:
            return sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageProblem(f"the prompt on stdin is not UTF-8: {exc}") from None
    return " ".join(words)


def _nonempty(text: str) -> str:
    if not text.strip():
        raise UsageProblem("the prompt is empty: nothing would be sent to the agent")
    return text


def _attachments(args: argparse.Namespace) -> tuple[Attachment, ...]:
    items = []
    for path, image in [(path, False) for path in args.file] + [(path, True) for path in args.image]:
        try:
            items.append(read_attachment(path, image=image))
        except OSError as exc:
            raise UsageProblem(f"{'--image' if image else '--file'} {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise UsageProblem(str(exc)) from None
    return tuple(items)


def _journal_path(args: argparse.Namespace, agent: AgentSpec) -> Path | None:
    if args.no_journal:
        return None
    if args.journal is not None:
        return Path(args.journal)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", agent.name)[:40] or "agent"
    try:
        return new_private_file(private_dir(journal_dir()), f"{stamp}-{name}", ".jsonl")
    except UnsafeDirectory as exc:
        raise UsageProblem(f"refusing the journal directory: {exc}") from None
    except OSError as exc:
        raise UsageProblem(f"cannot create the journal: {exc} (use --journal PATH or --no-journal)") from None


def _limits(args: argparse.Namespace) -> tuple[ReaderLimits, TransferLimits]:
    max_update = args.max_update_bytes
    if max_update is None:  # follow a lowered line limit: an update can never be longer than a line
        max_update = min(_DEFAULT_LIMITS.max_update_bytes, args.max_line)
    if max_update > args.max_line:
        raise UsageProblem(f"--max-update-bytes ({max_update}) may not exceed --max-line ({args.max_line})")
    transfer = TransferLimits(
        max_message_bytes=args.max_message_bytes,
        max_update_bytes=max_update,
        max_updates=args.max_updates,
        max_reply_bytes=args.max_reply_bytes,
        max_reply_chunks=args.max_reply_chunks,
    )
    return ReaderLimits(max_line=args.max_line), transfer


def _run_settings(args: argparse.Namespace, text: str, *, chat: bool = False) -> PromptSettings:
    """What ``prompt`` and ``chat`` are asked to do, checked: a usage error here starts no agent."""
    _check_texts(args, text)
    agent = _agent(args)
    cwd = _cwd(args)
    attachments = () if chat else _attachments(args)
    reader_limits, transfer_limits = _limits(args)
    _check_prompt_size(text, transfer_limits.max_message_bytes)
    terminal = isatty(sys.stdin) and isatty(sys.stderr)
    plan = _plan(args, agent, cwd)
    policy = permission_policy(args, agent.allow_tools, agent.deny_tools)
    for line in rule_notes(agent.name, agent.notes, policy):
        print(f"tinyacp: {sanitize(line)}", file=sys.stderr)
    return PromptSettings(
        agent=agent,
        text=text,
        cwd=cwd,
        attachments=attachments,
        policy=policy,
        ask=terminal and not args.yes and not args.no_input,
        questions=terminal and not args.no_input,
        no_ask_reason="--no-input was given" if args.no_input else "there is no terminal to ask",
        json=not chat and args.format == "json",
        quiet=args.quiet,
        timeout=args.timeout,
        cancel_grace=args.cancel_grace,
        kill_grace=args.kill_grace,
        journal=_journal_path(args, agent),
        sync_journal=args.sync_journal,
        reader_limits=reader_limits,
        transfer_limits=transfer_limits,
        agent_log=args.agent_log,
        plan=plan,
        index=SessionIndex(),
        agent_key=agent.key,
        startup_timeout=args.startup_timeout,
        fail_on_reject=not chat and args.fail_on_reject,
    )


def _check_texts(args: argparse.Namespace, text: str) -> None:
    """The text arguments that go into ACP messages are UTF-8 (the prompt read from stdin already is)."""
    text_argument("the prompt", text)
    for flag in ("system_prompt", "mode", "model", "auth"):
        text_argument(f"--{flag.replace('_', '-')}", getattr(args, flag, None))
    for item in getattr(args, "options", None) or []:
        text_argument(f"--set {utf8_or_escaped(item)!r}", item)


def _check_prompt_size(text: str, limit: int) -> None:
    """A prompt whose text alone is longer than one message may be is refused before the agent starts (the
    attachments, whose form depends on what the agent accepts, are checked when the prompt is sent)."""
    import msgspec

    size = len(msgspec.json.encode(text))
    if size > limit:
        raise UsageProblem(
            f"the prompt is {size:,} bytes as JSON, more than one message may carry ({limit:,} bytes, "
            "--max-message-bytes): nothing was sent; shorten the prompt or raise --max-message-bytes"
        )


def _plan(args: argparse.Namespace, agent: AgentSpec, cwd: Path) -> SessionPlan:
    """The session to open and its settings: the flags, over the agent's entry in the config file."""
    options = {}
    for item in args.options:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageProblem(f"--set {item!r}: expected KEY=VALUE")
        options[key.strip()] = value
    given = AgentSettings(
        auth=args.auth,
        mode=args.mode,
        model=args.model,
        options=options,
        mcp_config=args.mcp_config,
        system_prompt=args.system_prompt,
        system_prompt_mode=args.system_prompt_mode or "append",
    )
    settings = given.over(agent.settings)
    if args.system_prompt_mode is None:
        settings = dataclasses.replace(settings, system_prompt_mode=agent.settings.system_prompt_mode)
    try:
        mcp_servers = tuple(read_mcp_config(settings.mcp_config)) if settings.mcp_config is not None else ()
    except McpConfigError as exc:
        raise UsageProblem(str(exc)) from None
    system_prompt = None
    if settings.system_prompt is not None:
        override = settings.system_prompt_mode == "override"
        system_prompt = SystemPrompt(settings.system_prompt, "override" if override else "append")
    return SessionPlan(
        cwd=cwd,
        mcp_servers=mcp_servers,
        auth=settings.auth,
        session_id=args.session,
        continue_last=args.continue_last,
        fork=args.fork,
        mode=settings.mode,
        model=settings.model,
        options=settings.options,
        system_prompt=system_prompt,
    )


def cmd_prompt(args: argparse.Namespace) -> int:
    """``tinyacp prompt``."""
    text = _nonempty(_prompt_text(args.text))
    return run_prompt(_run_settings(args, text))


def cmd_chat(args: argparse.Namespace) -> int:
    """``tinyacp chat``: many turns in one session, on a terminal."""
    if not (isatty(sys.stdin) and isatty(sys.stderr)):
        raise UsageProblem("tinyacp chat needs a terminal; in a script, use `tinyacp prompt` (one turn per run)")
    from .run._chat import run_chat

    return run_chat(_run_settings(args, "", chat=True))


def cmd_probe(args: argparse.Namespace) -> int:
    """``tinyacp probe``: initialize, open a session, print what the agent offers."""
    agent = _agent(args)
    cwd = _cwd(args)
    answer = InitializeAnswer()
    env = {**os.environ, **agent.env} if agent.env else None
    client: Client | None = None
    init = None
    code = Exit.OK
    try:
        options = Options(
            command=agent.command, cwd=cwd, env=env, observer=answer, stderr="tail", features=COMMAND_FEATURES
        )
        with Client(options) as client:
            answer.watch.arm(client.kill)
            init = client.initialize(timeout=args.timeout)
            report = {**initialize_report(agent, init, answer.raw), "command": list(agent.command), "session": None}
            if report["newer"]["providers"]:
                report["newer"]["provider_list"] = providers_of(client, args.timeout)
            code = _probe_session(client, init, agent, args, report, answer.raw)
    except TinyAcpError as exc:
        answer.watch.disarm()
        tail = getattr(exc, "stderr_tail", None) or (client.stderr_tail() if client is not None else None)
        why = explain(
            exc,
            agent,
            init,
            startup_timeout=None if init else args.timeout,
            cwd=cwd,
            watch=answer.watch,
            stderr_tail=tail,
            deadline_flag="--timeout",
        )
        print_error(why.message, "\n".join([*why.hint, *stderr_lines(tail)]))
        if args.format == "json":  # a script reads stdout: one document there too, saying why there is no report
            failed = {
                "outcome": OUTCOME_WORDS.get(why.code, "error"),
                "exit_code": int(why.code),
                "command": list(agent.command),
                "error": {"type": type(exc).__name__, "message": why.message, "hint": why.hint},
                "stderr": [line.strip() for line in stderr_lines(tail)[1:]],
            }
            print(json.dumps(failed, ensure_ascii=True))
        return int(why.code)
    if args.format == "json":
        print(json.dumps(report, ensure_ascii=True))
    else:
        print(sanitize(_probe_text(report)))
    return int(code)


def _probe_session(  # noqa: PLR0917  one call site; the pieces of one probe
    client: Client, init: Initialize, agent: AgentSpec, args: argparse.Namespace, report: dict[str, Any], raw: bytes
) -> Exit:
    """Open a session to see its modes, config options and commands; a login it needs is reported (exit 8)."""
    plan = SessionPlan(_cwd(args), auth=args.auth)
    try:
        opened = open_session(
            client,
            init,
            agent,
            plan,
            index=None,
            raw_methods=raw_auth_methods(raw),
            say=lambda text: print(f"tinyacp: {sanitize(text)}", file=sys.stderr),
            timeout=lambda: args.timeout,
        )
    except AuthRequired as exc:
        report["session"] = {"error": f"needs a login: {exc.message}"}
        return Exit.NOT_LOGGED_IN
    except (RequestError, SettingUnavailable) as exc:
        report["session"] = {"error": str(exc)}
        return Exit.OK
    state = client.session_state(opened.session.id)
    modes = state.modes
    report["session"] = {
        "id": opened.session.id,
        "modes": None
        if modes is None
        else {"current": modes.current_mode_id, "available": [m.id for m in modes.available_modes]},
        "config_options": [
            {"id": o.id, "name": o.name, "type": o.type, "value": o.current_value, "values": list(o.values)}
            for o in state.config_options
        ],
        "models": None
        if state.models is None
        else {
            "current": state.models.current_model_id,
            "available": [m.model_id for m in state.models.available_models],
        },
        "commands": [{"name": c.name, "description": c.description} for c in state.available_commands],
    }
    return Exit.OK


def _probe_text(report: dict[str, Any]) -> str:
    agent = report["agent"] or {}
    name = one_line(f"{agent.get('name', '?')} {agent.get('version', '')}", 100)
    title = f" ({one_line(agent['title'], 100)})" if agent.get("title") else ""
    prompt = report["prompt_capabilities"]
    mcp = report["mcp_capabilities"]
    sessions = ", ".join(one_line(key, 40) for key in session_capability_names(report["session_capabilities"]))
    lines = [
        f"agent:                {name}{title}",
        f"protocol version:     {report['protocol_version']}",
        f"prompt content:       text, resource links; image: {yes(prompt['image'])}, audio: {yes(prompt['audio'])}, "
        f"embedded files: {yes(prompt['embedded_context'])}",
        f"mcp servers:          stdio; http: {yes(mcp['http'])}, sse: {yes(mcp['sse'])}",
        f"load session:         {yes(report['load_session'])}",
        f"session capabilities: {sessions or 'none'}",
        "auth methods:         " + (", ".join(one_line(m["name"], 60) for m in report["auth_methods"]) or "none"),
    ]
    for method in report["auth_methods"]:
        lines.append(f"  {auth_method_line(method)}")
    return "\n".join(lines + _newer_lines(report["newer"]) + _session_lines(report["session"]))


def _newer_lines(newer: dict[str, Any]) -> list[str]:
    """What the agent offers of the newer calls, and what the command opts in to."""
    system = ", ".join(newer["system_prompt"]) or "no"
    lines = [
        f"fork:                 {yes(newer['fork'])}",
        f"system prompt:        {system}",
        f"session titles:       {yes(newer['title'])}",
        f"providers:            {yes(newer['providers'])}",
    ]
    listed = newer.get("provider_list")
    if isinstance(listed, str):
        lines.append(f"  {one_line(listed, 300)}")
    for provider in listed if isinstance(listed, list) else ():
        current = provider["current"]
        where = f"{one_line(current['api_type'], 20)} at {one_line(current['base_url'], 200)}" if current else "off"
        supports = ", ".join(one_line(kind, 20) for kind in provider["supported"])
        lines.append(f"  {one_line(provider['id'], 60)}: {where} (takes {supports or 'nothing it names'})")
    lines.append(f"the command opts in:  {', '.join(name.replace('_', ' ') for name in newer['opted_in'])}")
    return lines


def _session_lines(session: dict[str, Any] | None) -> list[str]:
    if session is None:
        return []
    if "error" in session:
        return [f"session:              {one_line(session['error'], 300)}"]
    modes = session["modes"]
    lines = [
        "modes:                "
        + (", ".join(modes["available"]) + f" (current: {modes['current']})" if modes else "none"),
    ]
    if session["models"]:
        models = session["models"]
        lines.append(f"models:               {', '.join(models['available'])} (current: {models['current']})")
    lines.append("config options:" + ("" if session["config_options"] else "       none"))
    for option in session["config_options"]:
        values = ", ".join(str(v) for v in option["values"]) or ("true, false" if option["type"] == "boolean" else "")
        lines.append(
            f"  {one_line(option['id'], 40)} = {one_line(str(option['value']), 60)}   ({one_line(values, 200)})"
        )
    commands = ", ".join("/" + one_line(c["name"], 40) for c in session["commands"])
    lines.append(f"commands:             {commands or 'none reported yet'}")
    return lines


def cmd_agents(args: argparse.Namespace) -> int:
    """``tinyacp agents``: the agents known by name, whether each can be started, how to install it."""
    from .agents._list import print_agents

    return print_agents(_config(args), args.format)


def cmd_sessions(args: argparse.Namespace) -> int:
    """``tinyacp sessions``: the sessions this machine ran (with their journals), and with ``--agent`` the
    agent's own list (``session/list``) beside them."""
    agent = _agent(args) if args.agent is not None or args.agent_command is not None else None
    cwd = _cwd(args) if args.cwd is not None else None
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


def cmd_show(args: argparse.Namespace) -> int:
    """``tinyacp show JOURNAL|last|SESSION_ID``."""
    from .journals._journals import resolve_journal, show_note
    from .journals._show import show

    path, note = resolve_journal(args.journal)
    show_note(note)
    return show(path, args.format, sys.stdout, sys.stderr)
