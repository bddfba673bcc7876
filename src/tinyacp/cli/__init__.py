"""The ``tinyacp`` command: send a prompt to a coding agent from a terminal or a CI job, watch what it does,
decide what it may run, and keep a record.

Subcommands: ``prompt`` (the main job), ``chat``, ``probe``, ``sessions``, ``agents``, ``show``, ``journals``,
``batch``, ``view``, ``replay`` and ``demo-agent``; run ``tinyacp COMMAND --help`` for each. The exit status of
``prompt``, ``chat`` and ``probe`` is listed in ``EXIT_STATUS`` (shown by ``--help``) and defined by
:class:`tinyacp.cli.shared._exit.Exit`.

This module is not imported by ``import tinyacp``: the library stays free of the command. It builds the parser
from light modules alone and imports a subcommand's module when that subcommand runs, so ``tinyacp --help`` and a
usage error do not pay for the client, the display or the batch runner.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .._bounds import MAX_CONCURRENCY, MAX_LINE_LIMIT, MAX_SECONDS
from .._constants import SYSTEM_PROMPT_MODES
from .._version import __version__
from .shared._dirs import default_config_path
from .shared._exit import BATCH_EXIT_STATUS, CHECK_EXIT_STATUS, EXIT_STATUS, Exit, UsageProblem
from .shared._usage import ParseError, Parser, json_asked, usage_error

TYPE_CHECKING = False  # not typing's: typing is a tenth of `tinyacp --help` (benchmarks/RESULTS.md, start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main"]

_PROBE_TIMEOUT = 120.0  # the first `npx -y` of an adapter downloads it (and Node's own start is slow)
_STARTUP_TIMEOUT = 120.0  # an npx/uvx entry: its first start downloads the package
_LOCAL_STARTUP_TIMEOUT = 30.0  # any other program: a local start that takes longer is stuck, not busy


# ----------------------------------------------------------------------------------------------------------------
# Parsing.


def _size(text: str) -> int:
    """A byte count: ``1048576``, ``512K``, ``16M``, ``1G`` (powers of 1024; ``KiB``/``MB`` spellings too)."""
    match = re.fullmatch(r"\s*(\d{1,19})\s*([kmg]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if match is None or int(match.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"not a positive size: {text!r} (examples: 4096, 512K, 16M)")
    power = " kmg".index((match.group(2) or " ").lower())
    size = int(match.group(1)) << (10 * power)
    if size > _LARGEST_SIZE:
        raise argparse.ArgumentTypeError(f"{text!r} is more than tinyacp takes (at most 1G)")
    return size


# The library's own bounds (docs/limits.md), so that a flag takes what the library takes.
_LARGEST_SIZE = MAX_LINE_LIMIT
"""1 GiB: a line buffer is set aside whole (mapped, not touched), so a limit is a size this machine can map."""
_LONGEST_WAIT = float(MAX_SECONDS)
"""Seconds (about 11 days): a deadline beyond it is no deadline a person means, and poll() takes milliseconds
in a C int."""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= _LONGEST_WAIT:
        raise argparse.ArgumentTypeError(f"seconds must be a number from 0 to {_LONGEST_WAIT:.0f}, not {text!r}")
    return value


def _whole(text: str, least: int, most: int = 1_000_000) -> int:
    try:
        value = int(text) if len(text) <= 20 else None  # int() of 5000 digits is itself an error
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"not a whole number: {text[:40]!r}")
    if not least <= value <= most:
        raise argparse.ArgumentTypeError(f"must be from {least} to {most}, not {value}")
    return value


def _positive(text: str) -> int:
    return _whole(text, 1)


def _concurrency(text: str) -> int:
    """Turns at once: each holds an agent process and its pipes, and a worker task is made for each slot."""
    return _whole(text, 1, MAX_CONCURRENCY)


def _count(text: str) -> int:
    return _whole(text, 0)


def _tool_name(text: str) -> str:
    """A tool name of ``--allow-tool`` or ``--deny-tool``: matched exactly against the agent's, so an empty one (a
    shell variable left unset) would match nothing and hide the mistake."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"a tool name cannot be empty or blank: {text!r} (names look like Read, Bash)")
    return text


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The handler ``name`` of ``module`` (dotted, under this package), imported when the subcommand runs, not when
    it is parsed."""

    def handler(args: argparse.Namespace) -> int:
        found: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(f".{module}", __name__), name)
        return found(args)

    return handler


_Options = Callable[[argparse.ArgumentParser], None]


class _Subcommands:
    """Subcommands whose own options are added only to the one the command line names.

    ``tinyacp --help`` needs only their names and summaries, and a run only its own subcommand's options: adding
    every subcommand's options (and importing ``replay`` for its own) cost each run about 14 ms of its start.
    """

    def __init__(self, add_parser: Callable[..., argparse.ArgumentParser], chosen: str | None) -> None:
        self.add_parser = add_parser
        self._chosen = chosen

    def add(self, name: str, options: _Options, **kwargs: Any) -> argparse.ArgumentParser:
        """Add the subcommand ``name``; ``options`` adds its own options to its parser, when it is the chosen one
        (every subcommand is, when none was named)."""
        parser = self.add_parser(name, **kwargs)
        if self._chosen is None or self._chosen == name:
            options(parser)
        return parser


def _chosen(argv: Sequence[str]) -> str:
    """The subcommand a command line names: its first word that is not an option (``tinyacp`` itself takes only
    ``--help`` and ``--version``, which take no value); "" when there is none."""
    return next((word for word in argv if not word.startswith("-")), "")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line of ``tinyacp``. Given the command line ``argv``, only the subcommand it names gets its own
    options (what ``main`` uses); without it, every subcommand is complete."""
    parser = Parser(
        prog="tinyacp",
        description="Send prompts to coding agents that speak ACP, watch them work, decide what they may run.",
    )
    parser.add_argument("--version", action="version", version=f"tinyacp {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = _Subcommands(subparsers.add_parser, None if argv is None else _chosen(argv))

    config = Parser(add_help=False)  # Parser's formatter: no shutil import for the options' metavar checks
    config.add_argument("--config", type=Path, metavar="PATH", help=f"config file (default: {default_config_path()})")
    agent = Parser(add_help=False)
    agent.add_argument(
        "--agent",
        metavar="NAME",
        help='an agent name (see `tinyacp agents`), optionally with more arguments ("demo --delay 1"); '
        "a value with a space whose first word names no agent is run as a command line "
        "(default: the config's default_agent, else the built-in demo agent)",
    )
    agent.add_argument(
        "--agent-command",
        metavar='"CMD ARGS"',
        help="run this command line as the agent (split as a shell would, run without one)",
    )
    agent.add_argument("--cwd", default=".", metavar="DIR", help="the session's working directory (default: .)")

    commands.add(
        "prompt",
        _prompt_options,
        parents=[config, agent],
        help="send a prompt to an agent and show what it does",
        description="Send TEXT to the agent, show its work on stderr, stream its reply to stdout.",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands.add(
        "chat",
        _chat_options,
        parents=[config, agent],
        help="a conversation with an agent on a terminal, one session, many turns",
        description="Talk with the agent turn after turn in one session. Ctrl-C cancels the turn, not the chat; "
        "Ctrl-D ends the chat and closes the session. /help lists the commands.",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands.add(
        "probe",
        _probe_options,
        parents=[config, agent],
        help="start an agent and show what it offers",
        description="Start the agent, initialize, print what it offers, stop it.",
    )
    commands.add(
        "sessions",
        _sessions_options,
        parents=[config],
        help="the sessions tinyacp ran, most recent first (--continue picks up the first of an agent and directory)",
        description="List the sessions `tinyacp prompt` and `chat` ran on this machine, most recent first, with their "
        "prompts and journals; with --agent (or --agent-command), also the agent's own list (session/list, when it "
        "offers one).",
    )
    commands.add(
        "agents",
        _agents_options,
        parents=[config],
        help="list the agents known by name; --check starts them and shows what each answers",
        description="List the agents known by name: their command, whether each is installed, what it needs, how "
        "to install it and log in. With --check, start agents (each in an empty temporary directory), send "
        "initialize and nothing else, and print what each answered.",
        epilog=CHECK_EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands.add(
        "show",
        _show_options,
        help="render a journal as a readable conversation",
        description="Print a journal as a readable conversation: each prompt, the agent's plan, thoughts, tool calls, "
        "permission decisions (and who made them) and its reply.",
    )
    commands.add(
        "journals",
        _journals_options,
        help="list the journals of your runs (size, age, agent, session); --prune removes old ones",
        description="List the journals `tinyacp prompt` and `chat` wrote to the journal directory, newest first. "
        "--prune --older-than 30d removes those last written before then, and says how much it freed.",
    )
    commands.add(
        "batch",
        _add_batch_options,
        parents=[config],
        help="run many prompts from a JSONL file, resumably (local or on Ray)",
        description="tinyacp batch FILE.jsonl --out DIR: run many prompts, resumably, and summarise them.",
        epilog=BATCH_EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands.add(
        "view",
        _view_options,
        help="a batch or journals as one self-contained HTML page to read in a browser",
        description="Write one self-contained HTML page (it loads and sends nothing) showing a batch's output "
        "directory, a journal or a directory of journals: an overview per agent, a table of the turns that sorts "
        "and filters, and each turn's transcript. With no PATH, the journals of your own runs, latest first. "
        "With several batch directories (tinyacp view A B ...), one page matching their items by id: an outcome "
        "column per batch, the items that differ first, the batches' totals and each item's turns side by side.",
    )
    commands.add(
        "export",
        _export_options,
        help="send a journal or a batch's directory to an OpenTelemetry backend as traces (OTLP/HTTP)",
        description="Send what a journal (or each journal of a batch's directory) recorded as the spans a traced "
        "run makes, with the recorded times; ids are derived from the files, so the same journal always gives "
        "the same spans. See docs/traces.md.",
    )
    commands.add("replay", _replay_options, help="be a recorded agent: replay a journal's agent side (a test double)")
    commands.add_parser(
        "demo-agent",
        help="run the built-in demo agent on stdin/stdout (same flags as python -m tinyacp.demo)",
        add_help=False,
    )
    return parser


def _prompt_options(prompt: argparse.ArgumentParser) -> None:
    prompt.add_argument("text", nargs="+", metavar="TEXT", help="the prompt; - reads it from stdin")
    prompt.add_argument("--format", choices=("text", "json"), default="text", help="stdout: the reply, or events")
    content = prompt.add_argument_group("content")
    content.add_argument("--file", action="append", default=[], metavar="FILE", help="attach a file")
    content.add_argument("--image", action="append", default=[], metavar="FILE", help="attach an image")
    _add_run_options(prompt, chat=False)
    prompt.set_defaults(handler=_lazy("run._command", "cmd_prompt"))


def _chat_options(chat: argparse.ArgumentParser) -> None:
    _add_run_options(chat, chat=True)
    chat.set_defaults(handler=_lazy("run._command", "cmd_chat"))


def _probe_options(probe: argparse.ArgumentParser) -> None:
    probe.add_argument("--format", choices=("text", "json"), default="text", help="stdout: text, or one JSON object")
    probe.add_argument("--auth", metavar="METHOD", help="log in with this auth method before opening the session")
    probe.add_argument(
        "--timeout",
        type=_seconds,
        default=_PROBE_TIMEOUT,
        metavar="SECONDS",
        help=f"per agent call (default {_PROBE_TIMEOUT:g}: an npx cold start)",
    )
    probe.set_defaults(handler=_lazy("agents._probe", "cmd_probe"))


def _sessions_options(sessions: argparse.ArgumentParser) -> None:
    sessions.add_argument("--agent", metavar="NAME", help="only this agent's sessions")
    sessions.add_argument("--agent-command", metavar='"CMD ARGS"', help="only the sessions of this command line")
    sessions.add_argument("--cwd", metavar="DIR", help="only the sessions in this directory")
    sessions.add_argument("--format", choices=("text", "json"), default="text")
    sessions.add_argument(
        "--limit", type=_positive, metavar="N", help="only the first N of each list (this machine's: the most recent)"
    )
    sessions.add_argument("--timeout", type=_seconds, default=_PROBE_TIMEOUT, metavar="SECONDS", help="per agent call")
    sessions.set_defaults(handler=_lazy("sessions._sessions", "cmd_sessions"))


_CHECK_TIMEOUT = 30.0
"""``agents --check``'s deadline of an agent's answer to ``initialize``; an ``npx``/``uvx`` entry gets
``_STARTUP_TIMEOUT``, as its first start downloads it."""


def _agents_options(agents: argparse.ArgumentParser) -> None:
    agents.add_argument("--format", choices=("text", "json"), default="text", help="stdout: text, or JSON")
    check = agents.add_argument_group("checking that agents start (initialize only: no session, no prompt)")
    check.add_argument(
        "--check",
        nargs="*",
        metavar="NAME",
        help="start these agents (default: each one that starts without a download and is on PATH), send "
        "initialize, and print what each answered; an npx/uvx entry is checked only when named, or with --all",
    )
    check.add_argument("--all", action="store_true", help="with --check: every known agent, npx/uvx ones included")
    check.add_argument(
        "--agent-command",
        action="append",
        default=[],
        metavar='"CMD ARGS"',
        help="with --check: check this command line too (repeatable; split as a shell would, run without one)",
    )
    check.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help=f"with --check: each agent's deadline to answer initialize (default {_CHECK_TIMEOUT:g}; "
        f"{_STARTUP_TIMEOUT:g} for an npx/uvx entry: a first start downloads it)",
    )
    check.add_argument(
        "--concurrency", type=_concurrency, default=4, metavar="N", help="with --check: agents at once (default 4)"
    )
    check.add_argument(
        "--sandbox",
        action="store_true",
        help="with --check: start each agent in the sandbox (bubblewrap, Linux), with its table's defaults",
    )
    agents.set_defaults(handler=_agents_or_check, check_timeout=_CHECK_TIMEOUT, download_timeout=_STARTUP_TIMEOUT)


def _agents_or_check(args: argparse.Namespace) -> int:
    """``tinyacp agents``, or with ``--check`` the check of the agents (imported only then)."""
    if args.check is None:
        given = [
            flag
            for flag, value in (
                ("--all", args.all),
                ("--timeout", args.timeout),
                ("--agent-command", args.agent_command),
                ("--sandbox", args.sandbox),
            )
            if value
        ]
        if given:
            raise UsageProblem(f"{given[0]} is an option of --check")
        return _lazy("agents._list", "cmd_agents")(args)
    return _lazy("agents._check", "cmd_check")(args)


def _show_options(show: argparse.ArgumentParser) -> None:
    show.add_argument(
        "journal",
        type=Path,
        metavar="JOURNAL",
        help="a journal file; `last`: the latest journal; a session id: the latest journal of that session",
    )
    show.add_argument("--format", choices=("text", "json"), default="text")
    show.set_defaults(handler=_lazy("journals._show", "cmd_show"))


def _journals_options(journals: argparse.ArgumentParser) -> None:
    journals.add_argument("--limit", type=_positive, metavar="N", help="only the N newest")
    journals.add_argument("--format", choices=("text", "json"), default="text")
    journals.add_argument("--prune", action="store_true", help="remove the journals older than --older-than")
    journals.add_argument("--older-than", metavar="AGE", help="with --prune: an age such as 30d, 12h, 2w")
    journals.add_argument("--dry-run", action="store_true", help="with --prune: say what would go, remove nothing")
    journals.add_argument(
        "--all", action="store_true", help="with --prune: remove every journal (an --older-than of 0 needs it)"
    )
    journals.set_defaults(handler=_lazy("journals._journals", "cmd_journals"))


def _view_options(view: argparse.ArgumentParser) -> None:
    view.add_argument(
        "path",
        type=Path,
        nargs="*",
        metavar="PATH",
        help="a batch's --out directory, a journal, or a directory of journals (default: the journals of tinyacp "
        "prompt and chat); two or more batch directories: one page comparing them item by item",
    )
    view.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="the page to write (default: report.html in a batch's directory, else ./tinyacp-view.html)",
    )
    view.add_argument("--open", action="store_true", help="open the page in the system's browser")
    view.add_argument(
        "--max-turn-bytes",
        type=_size,
        default=256 * 1024,
        metavar="SIZE",
        help="text of each turn's transcript kept in the page (default 256K; the page says what it cut)",
    )
    view.set_defaults(handler=_lazy("journals._view", "cmd_view"))


def _export_options(export: argparse.ArgumentParser) -> None:
    export.add_argument("path", type=Path, metavar="JOURNAL|BATCH_DIR", help="a journal, or a batch's --out directory")
    export.add_argument(
        "--otlp",
        required=True,
        metavar="URL",
        help="the backend's OTLP/HTTP endpoint (http://HOST:4318, or …/v1/traces)",
    )
    export.add_argument(
        "--capture-content", action="store_true", help="put the prompts' and replies' text in the spans (default: no)"
    )
    export.set_defaults(handler=_lazy("journals._export", "cmd_export"))


def _replay_options(replayer: argparse.ArgumentParser) -> None:
    from .. import replay
    from .._roles import plain

    replayer.description = plain((replay.__doc__ or "").split("\n\n")[1])
    replay.build_parser(replayer)
    replayer.set_defaults(handler=replay.run)


def _add_batch_options(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``tinyacp batch``."""
    parser.add_argument("file", type=Path, metavar="FILE.jsonl", help="the items, one JSON object per line")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="results.jsonl and journals/ go here")
    parser.add_argument("--agent", metavar='NAME|"CMD ARGS"', help="the agent of items that name none")
    parser.add_argument("--cwd", metavar="DIR", help="the working directory of items that give none (default: .)")
    parser.add_argument("--concurrency", type=_concurrency, default=4, metavar="N", help="turns at once (default 4)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local", help="where turns run")
    parser.add_argument("--ray-address", metavar="ADDR", help="the Ray cluster to join (default: start one)")
    parser.add_argument("--retry-failed", action="store_true", help="run again the items whose record is not ok")
    parser.add_argument("--retries", type=_count, default=0, metavar="N", help="extra attempts per failed turn")
    parser.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="deadline of each turn")
    parser.add_argument(
        "--sync-journal", action="store_true", help="fsync every journal record (default: at permission decisions)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="json: stream the records")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line, no summary table")
    _add_otel_option(parser)
    rules = parser.add_argument_group("permissions (nobody is asked: what no rule allows is rejected)")
    _add_permission_rules(rules)
    rules.add_argument("--no-input", action="store_true", help="never ask (always so in a batch)")
    _add_sandbox_options(parser)
    _add_serve_options(parser)
    parser.set_defaults(handler=_lazy("batch._command", "cmd_batch"))


def _add_sandbox_options(parser: argparse.ArgumentParser) -> None:
    """``--sandbox`` and its options, shared by ``prompt``, ``chat`` and ``batch``."""
    box = parser.add_argument_group(
        "sandbox (Linux, bubblewrap: the agent writes only in its cwd, its state directories and --writable)"
    )
    which = box.add_mutually_exclusive_group()
    which.add_argument(
        "--sandbox", action="store_true", help="run the agent (and the commands of --serve terminal) in the sandbox"
    )
    which.add_argument("--no-sandbox", action="store_true", help="not in the sandbox, whatever config.toml says")
    box.add_argument(
        "--sandbox-network",
        choices=("on", "off"),
        help="the network in the sandbox, off meaning loopback only (default: on for the agent, which must reach"
        " its model; off for served commands)",
    )
    box.add_argument(
        "--writable",
        action="append",
        default=[],
        metavar="DIR",
        help="another directory the sandboxed agent may write in (repeatable; implies --sandbox)",
    )


def _add_permission_rules(rules: argparse._ArgumentGroup) -> None:
    """The rules of the permission policy, shared by ``prompt``, ``chat`` and ``batch``."""
    rules.add_argument(
        "--allow-tool",
        action="append",
        default=[],
        type=_tool_name,
        metavar="NAME",
        help="allow the tool NAME (Read, Grep, ...)",
    )
    rules.add_argument(
        "--deny-tool",
        action="append",
        default=[],
        type=_tool_name,
        metavar="NAME",
        help="never allow the tool NAME (Bash, ...), whatever else allows it, --yes included",
    )
    rules.add_argument(
        "--allow-kind",
        action="append",
        default=[],
        metavar="KIND",
        help="allow tool calls of KIND, and served actions of KIND (read, edit, execute)",
    )
    rules.add_argument("--allow-title", action="append", default=[], metavar="PREFIX", help="allow titles with PREFIX")
    rules.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="allow every tool call but a --deny-tool, and every served read, write and command inside the "
        "session's folders but a --deny-command",
    )


def _serve_kinds(text: str) -> list[str]:
    words = [word.strip() for word in text.split(",") if word.strip()]
    wrong = [word for word in words if word not in ("read", "write", "terminal")]
    if not words or wrong:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of read, write and terminal")
    return words


def _add_serve_options(parser: argparse.ArgumentParser) -> None:
    """The files and terminals served to the agent, shared by ``prompt``, ``chat`` and ``batch``."""
    serve = parser.add_argument_group(
        "files and terminals served to the agent (default: none; also per agent in config.toml)"
    )
    serve.add_argument(
        "--serve",
        type=_serve_kinds,
        action="append",
        default=[],
        metavar="read,write,terminal",
        help="do the agent's reads, writes and commands for it, each decided like a permission request and "
        "confined to the session's folders (see docs: serving files and terminals)",
    )
    serve.add_argument("--root", action="append", default=[], metavar="DIR", help="serve DIR besides the session's")
    serve.add_argument(
        "--allow-command",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run command lines matching PATTERN (a glob: 'pytest*'); a coarse guard an agent can word around",
    )
    serve.add_argument(
        "--deny-command",
        action="append",
        default=[],
        metavar="PATTERN",
        help="never run command lines matching PATTERN ('*git push*'), whatever allows them, --yes included",
    )


def _add_otel_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--otel-endpoint",
        metavar="URL",
        help="export the run's OpenTelemetry spans over OTLP/HTTP to URL (default: as the OTEL_* variables say; "
        'needs pip install "tinyacp[otel]"; see docs/traces.md)',
    )


def _add_run_options(parser: argparse.ArgumentParser, *, chat: bool) -> None:
    """The options ``prompt`` and ``chat`` share: permissions, session settings, journal, time, limits."""
    rules = parser.add_argument_group("permissions (default: ask on a terminal, else reject)")
    _add_permission_rules(rules)
    rules.add_argument("--no-input", action="store_true", help="never ask: reject what no rule allows")
    rules.add_argument(
        "--open-urls",
        action="store_true",
        help="open in your browser an http(s) link the agent asks you to visit (default: show it only)",
    )
    _add_serve_options(parser)
    if not chat:
        rules.add_argument(
            "--fail-on-reject",
            action="store_true",
            help=f"exit {int(Exit.REJECTED)} when the turn ends but a permission request was rejected or cancelled",
        )
    session = parser.add_argument_group("session (also per agent in config.toml; a flag wins)")
    which = session.add_mutually_exclusive_group()
    which.add_argument(
        "--continue",
        dest="continue_last",
        action="store_true",
        help="continue the most recent session this machine ran with this agent in this directory",
    )
    which.add_argument("--session", metavar="ID", help="continue session ID (session/resume, else session/load)")
    which.add_argument(
        "--fork", metavar="ID", help="fork session ID (session/fork) and work in the fork; ID is left as it was"
    )
    session.add_argument("--auth", metavar="METHOD", help="log in with this auth method after initialize")
    session.add_argument("--mode", metavar="ID", help="the session's mode")
    session.add_argument("--model", metavar="ID", help="the session's model")
    session.add_argument(
        "--set",
        dest="options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config option (repeatable)",
    )
    session.add_argument(
        "--mcp-config",
        metavar="FILE",
        help="MCP servers for the session, in the mcpServers JSON format of Claude Desktop and Cursor",
    )
    session.add_argument("--system-prompt", metavar="TEXT", help="text added to the agent's system prompt")
    session.add_argument(
        "--system-prompt-mode",
        choices=SYSTEM_PROMPT_MODES,
        help="append to the agent's system prompt (default) or override it",
    )
    record = parser.add_argument_group("journal (default: one file per run in the state directory)")
    record.add_argument("--journal", type=Path, metavar="PATH", help="append the run's journal to PATH")
    record.add_argument("--no-journal", action="store_true", help="keep no journal")
    record.add_argument("--sync-journal", action="store_true", help="fsync every journal line")
    _add_otel_option(parser)
    timing = parser.add_argument_group("time")
    what = "deadline of each turn" if chat else "deadline of the whole run"
    timing.add_argument("--timeout", type=_seconds, metavar="SECONDS", help=what)
    timing.add_argument(
        "--startup-timeout",
        type=_seconds,
        metavar="SECONDS",
        help=(
            f"deadline of the agent's answer to initialize (default {_STARTUP_TIMEOUT:g} for an npx/uvx agent, "
            f"whose first start downloads it; {_LOCAL_STARTUP_TIMEOUT:g} for any other)"
        ),
    )
    parser.set_defaults(download_startup_timeout=_STARTUP_TIMEOUT, local_startup_timeout=_LOCAL_STARTUP_TIMEOUT)
    timing.add_argument("--cancel-grace", type=_seconds, default=5.0, metavar="SECONDS", help="wait after a cancel")
    timing.add_argument("--kill-grace", type=_seconds, default=2.0, metavar="SECONDS", help="SIGTERM to SIGKILL")
    # Imported here, for the subcommands that take them: `tinyacp --help` needs neither (nor their dataclasses).
    from .._limits import TransferLimits
    from ..reader import DEFAULT_MAX_LINE

    defaults = TransferLimits()
    limits = parser.add_argument_group("limits (sizes in bytes; K, M, G suffixes)")
    limits.add_argument("--max-line", type=_size, default=DEFAULT_MAX_LINE, metavar="SIZE")
    for name, default in (
        ("max-message-bytes", defaults.max_message_bytes),
        ("max-update-bytes", None),
        ("max-updates", defaults.max_updates),
        ("max-reply-bytes", defaults.max_reply_bytes),
        ("max-reply-chunks", defaults.max_reply_chunks),
        ("max-notices", defaults.max_notices),
        ("max-notice-bytes", defaults.max_notice_bytes),
        ("max-subagents", defaults.max_subagents),
        ("max-subagent-bytes", defaults.max_subagent_bytes),
    ):
        limits.add_argument(f"--{name}", type=_size, default=default, metavar="SIZE" if "bytes" in name else "N")
    shown = parser.add_argument_group("display")
    shown.add_argument(
        "-q", "--quiet", action="store_true", help="show nothing on stderr but errors and how a failed turn ended"
    )
    shown.add_argument("--agent-log", type=Path, metavar="FILE", help="append the agent's stderr to FILE")
    _add_sandbox_options(parser)


# ----------------------------------------------------------------------------------------------------------------
# Entry point.


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tinyacp`` command; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["demo-agent"]:  # the demo's own parser takes every flag, --help included
        from .. import demo

        return demo.main(args_list[1:], prog="tinyacp demo-agent")
    parser = build_parser(args_list)
    try:
        args, unknown = parser.parse_known_args(args_list)
        if unknown:
            _refuse_unknown(parser, args.command, unknown, args_list)
    except ParseError as exc:
        return _usage_error(str(exc), args_list, prog=exc.prog, usage=exc.usage)
    if args.command is None:
        parser.print_help(sys.stderr)
        return int(Exit.USAGE)
    return _handle(args, args_list)


def _refuse_unknown(parser: argparse.ArgumentParser, command: str | None, unknown: list[str], argv: list[str]) -> None:
    """Refuse arguments no parser took, in the name of the subcommand they were given to: argparse's own
    ``parse_args`` reports them from the top-level parser, whose usage and ``--help`` are not the ones to read.

    Raises:
        ParseError: always.
    """
    subparsers = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    chosen = subparsers.choices.get(command) if subparsers is not None and command else None
    # An unknown word before the subcommand's name was given to ``tinyacp`` itself.
    before = command is not None and command in argv and unknown[0] in argv[: argv.index(command)]
    owner = parser if chosen is None or before else chosen
    owner.error(f"unrecognized arguments: {' '.join(unknown)}")


def _usage_error(message: str, args_list: list[str], *, prog: str = "tinyacp", usage: str | None = None) -> int:
    """Say the usage error; with ``prompt --format json``, write the ``result`` event of the run that never
    began on stdout too (a reader of stdout always gets its last event)."""
    code = usage_error(message, prog=prog, usage=usage)
    if json_asked(args_list):
        from .run._events import usage_result

        usage_result(sys.stdout.buffer, message)
    return code


def _handle(args: argparse.Namespace, args_list: list[str]) -> int:
    """Run the subcommand; its exit status."""
    try:
        return int(args.handler(args))
    except UsageProblem as exc:
        return _usage_error(str(exc), args_list)
    except KeyboardInterrupt:
        return int(Exit.CANCELLED)
    except BrokenPipeError:  # `tinyacp show … | head`: the reader has what it wanted
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 0
