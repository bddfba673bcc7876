"""The ``tinyacp`` command: send a prompt to a coding agent from a terminal or a CI job, watch what it does,
decide what it may run, and keep a record.

Subcommands: ``prompt`` (the main job), ``chat``, ``probe``, ``sessions``, ``agents``, ``show``, ``journals``,
``batch``, ``view``, ``export``, ``replay`` and ``demo-agent``; run ``tinyacp COMMAND --help`` for each. The exit
status of ``prompt``, ``chat`` and ``probe`` is listed in ``EXIT_STATUS`` (shown by ``--help``) and defined by
:class:`tinyacp.cli.shared._exit.Exit`.

This module is the entry point: :func:`main` builds the parser, runs the subcommand's handler and says a usage
error. Each folder declares its own subcommands' options in its ``_args`` module, on what several share in
``shared/_args.py``; here they are put in the order ``tinyacp --help`` lists them. It is not imported by ``import
tinyacp``: the library stays free of the command. The parser is built from light modules alone and a subcommand's
implementation is imported when it runs, so ``tinyacp --help`` and a usage error do not pay for the client, the
display or the batch runner.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from .._version import __version__
from .agents._args import add_agents, add_probe
from .batch._args import add_batch
from .journals._args import add_export, add_journals, add_show, add_view
from .run._args import add_chat, add_prompt
from .sessions._args import add_sessions
from .shared._args import Subcommands
from .shared._exit import Exit, UsageProblem
from .shared._usage import ParseError, Parser, json_asked, usage_error

__all__ = ["main"]


# ----------------------------------------------------------------------------------------------------------------
# Parsing.


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
    commands = Subcommands(subparsers.add_parser, None if argv is None else _chosen(argv))
    add_prompt(commands)
    add_chat(commands)
    add_probe(commands)
    add_sessions(commands)
    add_agents(commands)
    add_show(commands)
    add_journals(commands)
    add_batch(commands)
    add_view(commands)
    add_export(commands)
    # The library's own programs, with their own parsers: the recorded agent and the demo agent.
    commands.add("replay", _replay_options, help="be a recorded agent: replay a journal's agent side (a test double)")
    commands.add_parser(
        "demo-agent",
        help="run the built-in demo agent on stdin/stdout (same flags as python -m tinyacp.demo)",
        add_help=False,
    )
    return parser


def _replay_options(replayer: argparse.ArgumentParser) -> None:
    from .. import replay
    from .._roles import plain

    replayer.description = plain((replay.__doc__ or "").split("\n\n")[1])
    replay.build_parser(replayer)
    replayer.set_defaults(handler=replay.run)


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
