"""The command line of ``tinyacp probe`` and ``tinyacp agents`` (with ``--check``), and the handler that sends
``agents`` to its list or to the check.

``tinyacp --help`` imports this module: it imports argparse and the parser's helpers alone.
"""

from __future__ import annotations

import argparse

from ..shared._args import (
    PROBE_TIMEOUT,
    STARTUP_TIMEOUT,
    Subcommands,
    add_agent,
    add_config,
    concurrency,
    lazy_handler,
    seconds,
)
from ..shared._exit import CHECK_EXIT_STATUS, UsageProblem

__all__ = ["add_agents", "add_probe"]

_CHECK_TIMEOUT = 30.0
"""``agents --check``'s deadline of an agent's answer to ``initialize``; an ``npx``/``uvx`` entry gets
``STARTUP_TIMEOUT``, as its first start downloads it."""


def add_probe(commands: Subcommands) -> None:
    """``tinyacp probe``: start an agent and show what it offers."""
    commands.add(
        "probe",
        _probe_options,
        help="start an agent and show what it offers",
        description="Start the agent, initialize, print what it offers, stop it.",
    )


def add_agents(commands: Subcommands) -> None:
    """``tinyacp agents``: the agents known by name; with ``--check``, what each answers."""
    commands.add(
        "agents",
        _agents_options,
        help="list the agents known by name; --check starts them and shows what each answers",
        description="List the agents known by name: their command, whether each is installed, what it needs, how "
        "to install it and log in. With --check, start agents (each in an empty temporary directory), send "
        "initialize and nothing else, and print what each answered.",
        epilog=CHECK_EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _probe_options(probe: argparse.ArgumentParser) -> None:
    add_config(probe)
    add_agent(probe)
    probe.add_argument("--format", choices=("text", "json"), default="text", help="stdout: text, or one JSON object")
    probe.add_argument("--auth", metavar="METHOD", help="log in with this auth method before opening the session")
    probe.add_argument(
        "--timeout",
        type=seconds,
        default=PROBE_TIMEOUT,
        metavar="SECONDS",
        help=f"per agent call (default {PROBE_TIMEOUT:g}: an npx cold start)",
    )
    probe.set_defaults(handler=lazy_handler("tinyacp.cli.agents._probe", "cmd_probe"))


def _agents_options(agents: argparse.ArgumentParser) -> None:
    add_config(agents)
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
        type=seconds,
        metavar="SECONDS",
        help=f"with --check: each agent's deadline to answer initialize (default {_CHECK_TIMEOUT:g}; "
        f"{STARTUP_TIMEOUT:g} for an npx/uvx entry: a first start downloads it)",
    )
    check.add_argument(
        "--concurrency", type=concurrency, default=4, metavar="N", help="with --check: agents at once (default 4)"
    )
    check.add_argument(
        "--sandbox",
        action="store_true",
        help="with --check: start each agent in the sandbox (bubblewrap, Linux), with its table's defaults",
    )
    agents.set_defaults(handler=_agents_or_check, check_timeout=_CHECK_TIMEOUT, download_timeout=STARTUP_TIMEOUT)


def _agents_or_check(args: argparse.Namespace) -> int:
    """``tinyacp agents``, or with ``--check`` the check of the agents (imported only then).

    Raises:
        UsageProblem: an option of ``--check`` was given without it.
    """
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
        return lazy_handler("tinyacp.cli.agents._list", "cmd_agents")(args)
    return lazy_handler("tinyacp.cli.agents._check", "cmd_check")(args)
