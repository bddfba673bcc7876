"""The command line of ``tinyacp sessions``.

``tinyacp --help`` imports this module: it imports argparse and the parser's helpers alone.
"""

from __future__ import annotations

import argparse

from ..shared._args import PROBE_TIMEOUT, Subcommands, add_config, lazy_handler, positive, seconds

__all__ = ["add_sessions"]


def add_sessions(commands: Subcommands) -> None:
    """``tinyacp sessions``: the sessions this machine ran, and the agent's own list."""
    commands.add(
        "sessions",
        _sessions_options,
        help="the sessions tinyacp ran, most recent first (--continue picks up the first of an agent and directory)",
        description="List the sessions `tinyacp prompt` and `chat` ran on this machine, most recent first, with their "
        "prompts and journals; with --agent (or --agent-command), also the agent's own list (session/list, when it "
        "offers one).",
    )


def _sessions_options(sessions: argparse.ArgumentParser) -> None:
    add_config(sessions)
    sessions.add_argument("--agent", metavar="NAME", help="only this agent's sessions")
    sessions.add_argument("--agent-command", metavar='"CMD ARGS"', help="only the sessions of this command line")
    sessions.add_argument("--cwd", metavar="DIR", help="only the sessions in this directory")
    sessions.add_argument("--format", choices=("text", "json"), default="text")
    sessions.add_argument(
        "--limit", type=positive, metavar="N", help="only the first N of each list (this machine's: the most recent)"
    )
    sessions.add_argument("--timeout", type=seconds, default=PROBE_TIMEOUT, metavar="SECONDS", help="per agent call")
    sessions.set_defaults(handler=lazy_handler("tinyacp.cli.sessions._sessions", "cmd_sessions"))
