"""The command line of ``tinyacp prompt`` and ``tinyacp chat``: their options, which ``_settings`` reads into the
run's settings. What ``batch`` takes too is declared in ``cli/shared/_args.py``.

``tinyacp --help`` imports this module: it imports argparse and the parser's helpers alone.
"""

from __future__ import annotations

import argparse

from ..._constants import SYSTEM_PROMPT_MODES
from ..shared._args import (
    STARTUP_TIMEOUT,
    Subcommands,
    add_agent,
    add_config,
    add_otel_option,
    add_permission_rules,
    add_sandbox_options,
    add_serve_options,
    lazy_handler,
    path,
    seconds,
    size,
)
from ..shared._exit import EXIT_STATUS, Exit

__all__ = ["add_chat", "add_prompt"]

_LOCAL_STARTUP_TIMEOUT = 30.0  # any agent but an npx/uvx one: a local start that takes longer is stuck, not busy


def add_prompt(commands: Subcommands) -> None:
    """``tinyacp prompt``: send a prompt to an agent and show what it does."""
    commands.add(
        "prompt",
        _prompt_options,
        help="send a prompt to an agent and show what it does",
        description="Send TEXT to the agent, show its work on stderr, stream its reply to stdout.",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_chat(commands: Subcommands) -> None:
    """``tinyacp chat``: a conversation with an agent, many turns in one session."""
    commands.add(
        "chat",
        _chat_options,
        help="a conversation with an agent on a terminal, one session, many turns",
        description="Talk with the agent turn after turn in one session. Ctrl-C cancels the turn, not the chat; "
        "Ctrl-D ends the chat and closes the session. /help lists the commands.",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _prompt_options(prompt: argparse.ArgumentParser) -> None:
    add_config(prompt)
    add_agent(prompt)
    prompt.add_argument("text", nargs="+", metavar="TEXT", help="the prompt; - reads it from stdin")
    prompt.add_argument("--format", choices=("text", "json"), default="text", help="stdout: the reply, or events")
    content = prompt.add_argument_group("content")
    content.add_argument("--file", action="append", default=[], metavar="FILE", help="attach a file")
    content.add_argument("--image", action="append", default=[], metavar="FILE", help="attach an image")
    _add_run_options(prompt, chat=False)
    prompt.set_defaults(handler=lazy_handler("tinyacp.cli.run._command", "cmd_prompt"))


def _chat_options(chat: argparse.ArgumentParser) -> None:
    add_config(chat)
    add_agent(chat)
    _add_run_options(chat, chat=True)
    chat.set_defaults(handler=lazy_handler("tinyacp.cli.run._command", "cmd_chat"))


def _add_run_options(parser: argparse.ArgumentParser, *, chat: bool) -> None:
    """The options ``prompt`` and ``chat`` share: permissions, session settings, journal, time, limits."""
    rules = parser.add_argument_group("permissions (default: ask on a terminal, else reject)")
    add_permission_rules(rules)
    rules.add_argument("--no-input", action="store_true", help="never ask: reject what no rule allows")
    rules.add_argument(
        "--open-urls",
        action="store_true",
        help="open in your browser an http(s) link the agent asks you to visit (default: show it only)",
    )
    add_serve_options(parser)
    if not chat:
        rules.add_argument(
            "--fail-on-reject",
            action="store_true",
            help=f"exit {int(Exit.REJECTED)} when the turn ends but a permission request was rejected or cancelled",
        )
    _add_session_options(parser)
    record = parser.add_argument_group("journal (default: one file per run in the state directory)")
    record.add_argument("--journal", type=path, metavar="PATH", help="append the run's journal to PATH")
    record.add_argument("--no-journal", action="store_true", help="keep no journal")
    record.add_argument("--sync-journal", action="store_true", help="fsync every journal line")
    add_otel_option(parser)
    _add_time_options(parser, chat=chat)
    _add_limits(parser)
    shown = parser.add_argument_group("display")
    shown.add_argument(
        "-q", "--quiet", action="store_true", help="show nothing on stderr but errors and how a failed turn ended"
    )
    shown.add_argument("--agent-log", type=path, metavar="FILE", help="append the agent's stderr to FILE")
    add_sandbox_options(parser)


def _add_session_options(parser: argparse.ArgumentParser) -> None:
    """Which session the run opens, and its settings."""
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


def _add_time_options(parser: argparse.ArgumentParser, *, chat: bool) -> None:
    """The run's deadlines, and the waits of its ending."""
    timing = parser.add_argument_group("time")
    what = "deadline of each turn" if chat else "deadline of the whole run"
    timing.add_argument("--timeout", type=seconds, metavar="SECONDS", help=what)
    timing.add_argument(
        "--startup-timeout",
        type=seconds,
        metavar="SECONDS",
        help=(
            f"deadline of the agent's answer to initialize (default {STARTUP_TIMEOUT:g} for an npx/uvx agent, "
            f"whose first start downloads it; {_LOCAL_STARTUP_TIMEOUT:g} for any other)"
        ),
    )
    parser.set_defaults(download_startup_timeout=STARTUP_TIMEOUT, local_startup_timeout=_LOCAL_STARTUP_TIMEOUT)
    timing.add_argument("--cancel-grace", type=seconds, default=5.0, metavar="SECONDS", help="wait after a cancel")
    timing.add_argument("--kill-grace", type=seconds, default=2.0, metavar="SECONDS", help="SIGTERM to SIGKILL")


def _add_limits(parser: argparse.ArgumentParser) -> None:
    """The bounds of what the agent may send, with the library's defaults."""
    # Imported here, for the subcommands that take them: `tinyacp --help` needs neither (nor their dataclasses).
    from ..._limits import TransferLimits
    from ...reader import DEFAULT_MAX_LINE

    defaults = TransferLimits()
    limits = parser.add_argument_group("limits (sizes in bytes; K, M, G suffixes)")
    limits.add_argument("--max-line", type=size, default=DEFAULT_MAX_LINE, metavar="SIZE")
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
        limits.add_argument(f"--{name}", type=size, default=default, metavar="SIZE" if "bytes" in name else "N")
