"""``tinyacp probe``: start an agent, ``initialize`` it, open a session, and print what it offers (prompt
content, MCP transports, login methods, the newer calls, its modes, models, config options and commands).

A login the session needs is reported (exit 8), not asked for; a failure is explained as a run's would be, and
with ``--format json`` stdout still gets one document saying why there is no report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..._client import Client
from ..._errors import AuthRequired, RequestError, TinyAcpError
from ..._messages import Initialize
from ..._options import Options
from ..shared._display import one_line, print_error, sanitize
from ..shared._exit import OUTCOME_WORDS, Exit, SettingUnavailable
from ..shared._features import COMMAND_FEATURES, providers_of
from ..shared._text import working_directory
from ._explain import explain, stderr_lines
from ._load import load_config
from ._offers import InitializeAnswer, auth_method_line, initialize_report, session_capability_names, yes
from ._resolve import AgentSpec, resolve_agent
from ._session import SessionPlan, open_session, raw_auth_methods

__all__ = ["cmd_probe"]


def cmd_probe(args: argparse.Namespace) -> int:
    """``tinyacp probe``: initialize, open a session, print what the agent offers."""
    agent = resolve_agent(args.agent, load_config(args.config), command=args.agent_command)
    cwd = working_directory(args.cwd)
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
    plan = SessionPlan(working_directory(args.cwd), auth=args.auth)
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
