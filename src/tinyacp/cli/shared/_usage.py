"""Usage errors: the error first, then a one-line usage and where the whole help is; :func:`json_asked` tells
whether the command line asked for a ``result`` event too (``prompt --format json``), so that a reader of stdout
always gets its last event (:func:`tinyacp.cli.run._events.usage_result` writes it).

argparse prints its whole usage (some 20 lines for ``prompt``) before the one line that matters; here a parser
raises :class:`ParseError` instead and :func:`usage_error` says it in three lines. This module is imported by
every run of the command, so it stays light.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ._exit import Exit

TYPE_CHECKING = False  # not typing's: typing is a tenth of `tinyacp --help` (benchmarks/RESULTS.md, start-up)
if TYPE_CHECKING:
    from typing import NoReturn

__all__ = ["ParseError", "Parser", "json_asked", "usage_error"]

RESULT_EVENTS = frozenset({"prompt"})
"""The subcommands whose ``--format json`` output ends with a ``result`` event, whatever happened."""


class ParseError(Exception):
    """The command line does not parse: the message, and the usage of the (sub)command that refused it."""

    def __init__(self, message: str, prog: str, usage: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.usage = usage


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are raised as :class:`ParseError` (its subcommands' parsers are of the
    same class) rather than printed with the whole usage."""

    def error(self, message: str) -> NoReturn:
        raise ParseError(message, self.prog, short_usage(self))

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every argument added (to check its metavar), and each one asks
        # shutil.get_terminal_size for the width: importing shutil (with zlib, bz2 and lzma) was a twentieth of
        # `tinyacp --help`. The same width, without shutil.
        return self.formatter_class(prog=self.prog, width=terminal_columns() - 2)  # type: ignore[call-arg]


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size().columns`` gives it: ``$COLUMNS`` when it is a positive
    number, else the width of the terminal on ``sys.__stdout__``, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def short_usage(parser: argparse.ArgumentParser) -> str:
    """``PROG [options] --required VALUE POSITIONALS``: the usage on one line."""
    formatter = parser._get_formatter()
    words = [parser.prog]
    if any(action.option_strings and not action.required for action in parser._actions):
        words.append("[options]")
    for action in parser._actions:
        if action.option_strings and action.required:
            metavar = formatter._get_default_metavar_for_optional(action)
            words.append(f"{action.option_strings[0]} {formatter._format_args(action, metavar)}")
    for action in parser._actions:
        if not action.option_strings and action.help != argparse.SUPPRESS:
            metavar = formatter._get_default_metavar_for_positional(action)
            words.append(formatter._format_args(action, metavar))
    return " ".join(words)


def json_asked(argv: Sequence[str]) -> bool:
    """Whether ``argv`` asks a subcommand with a ``result`` event for ``--format json`` (read before, or without,
    a successful parse: the options before a ``--`` only)."""
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    command = next((word for word in words if not word.startswith("-")), None)
    if command not in RESULT_EVENTS:
        return False
    pairs = zip(words, [*words[1:], ""], strict=True)
    return any(word == "--format=json" or (word == "--format" and after == "json") for word, after in pairs)


def usage_error(message: str, *, prog: str = "tinyacp", usage: str | None = None) -> int:
    """Say what is wrong (and the one-line usage, for a command line that does not parse); exit status 2."""
    from ._display import sanitize

    print(sanitize(f"{prog}: error: {message}"), file=sys.stderr)
    if usage is not None:
        print(sanitize(f"usage: {usage}"), file=sys.stderr)
        print(f"see: {prog} --help", file=sys.stderr)
    return int(Exit.USAGE)
