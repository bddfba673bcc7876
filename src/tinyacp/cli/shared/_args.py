"""The command line's shared parts: the table each folder adds its subcommands to (:class:`Subcommands`), the
types of the flags' values (a size, seconds, a count), and the options several subcommands take, declared once:
``--config``; ``--agent``, ``--agent-command`` and ``--cwd``; the permission rules; the files and terminals served;
the sandbox; ``--otel-endpoint``.

Each folder's ``_args`` declares its own subcommands on these. ``tinyacp --help`` imports them all, so this module
imports argparse and the library's bounds alone; a subcommand's implementation is imported when it runs
(:func:`lazy_handler`).
"""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Callable

from ..._bounds import MAX_CONCURRENCY, MAX_LINE_LIMIT, MAX_SECONDS

TYPE_CHECKING = False  # not typing's: typing is a tenth of `tinyacp --help` (benchmarks/RESULTS.md, start-up)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = [
    "PROBE_TIMEOUT",
    "STARTUP_TIMEOUT",
    "Subcommands",
    "add_agent",
    "add_config",
    "add_otel_option",
    "add_permission_rules",
    "add_sandbox_options",
    "add_serve_options",
    "concurrency",
    "count",
    "lazy_handler",
    "path",
    "positive",
    "seconds",
    "size",
]

PROBE_TIMEOUT = 120.0
"""The deadline of each agent call of ``probe`` and ``sessions``: the first ``npx -y`` of an adapter downloads it
(and Node's own start is slow)."""
STARTUP_TIMEOUT = 120.0
"""The deadline of an ``npx``/``uvx`` agent's answer to ``initialize``: its first start downloads the package."""


# ----------------------------------------------------------------------------------------------------------------
# The subcommands.

Options = Callable[[argparse.ArgumentParser], None]
"""What adds a subcommand's own options to its parser."""


class Subcommands:
    """Subcommands whose own options are added only to the one the command line names.

    ``tinyacp --help`` needs only their names and summaries, and a run only its own subcommand's options: adding
    every subcommand's options (and importing ``replay`` for its own) cost each run about 14 ms of its start.
    """

    def __init__(self, add_parser: Callable[..., argparse.ArgumentParser], chosen: str | None) -> None:
        self.add_parser = add_parser
        self._chosen = chosen

    def add(self, name: str, options: Options, **kwargs: Any) -> argparse.ArgumentParser:
        """Add the subcommand ``name``; ``options`` adds its own options to its parser, when it is the chosen one
        (every subcommand is, when none was named)."""
        parser = self.add_parser(name, **kwargs)
        if self._chosen is None or self._chosen == name:
            options(parser)
        return parser


def lazy_handler(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The handler ``name`` of ``module`` (a whole dotted name), imported when the subcommand runs, not when it is
    parsed."""

    def handler(args: argparse.Namespace) -> int:
        found: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), name)
        return found(args)

    return handler


# ----------------------------------------------------------------------------------------------------------------
# The types of the flags' values: each raises argparse.ArgumentTypeError, which the parser says as a usage error.

# The library's own bounds (docs/limits.md), so that a flag takes what the library takes.
_LARGEST_SIZE = MAX_LINE_LIMIT
"""1 GiB: a line buffer is set aside whole (mapped, not touched), so a limit is a size this machine can map."""
_LONGEST_WAIT = float(MAX_SECONDS)
"""Seconds (about 11 days): a deadline beyond it is no deadline a person means, and poll() takes milliseconds
in a C int."""


def size(text: str) -> int:
    """A byte count: ``1048576``, ``512K``, ``16M``, ``1G`` (powers of 1024; ``KiB``/``MB`` spellings too)."""
    match = re.fullmatch(r"\s*(\d{1,19})\s*([kmg]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if match is None or int(match.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"not a positive size: {text!r} (examples: 4096, 512K, 16M)")
    power = " kmg".index((match.group(2) or " ").lower())
    value = int(match.group(1)) << (10 * power)
    if value > _LARGEST_SIZE:
        raise argparse.ArgumentTypeError(f"{text!r} is more than tinyacp takes (at most 1G)")
    return value


def seconds(text: str) -> float:
    """A number of seconds, from 0 to about 11 days."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= _LONGEST_WAIT:
        raise argparse.ArgumentTypeError(f"seconds must be a number from 0 to {_LONGEST_WAIT:.0f}, not {text!r}")
    return value


def path(text: str) -> Path:
    """A file or directory, as a ``Path``: pathlib is imported when a command line gives one, not for ``tinyacp
    --help``."""
    from pathlib import Path

    return Path(text)


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


def positive(text: str) -> int:
    """A whole number from 1 to a million."""
    return _whole(text, 1)


def concurrency(text: str) -> int:
    """Turns at once: each holds an agent process and its pipes, and a worker task is made for each slot."""
    return _whole(text, 1, MAX_CONCURRENCY)


def count(text: str) -> int:
    """A whole number from 0 to a million."""
    return _whole(text, 0)


def _tool_name(text: str) -> str:
    """A tool name of ``--allow-tool`` or ``--deny-tool``: matched exactly against the agent's, so an empty one (a
    shell variable left unset) would match nothing and hide the mistake."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"a tool name cannot be empty or blank: {text!r} (names look like Read, Bash)")
    return text


def _serve_kinds(text: str) -> list[str]:
    words = [word.strip() for word in text.split(",") if word.strip()]
    wrong = [word for word in words if word not in ("read", "write", "terminal")]
    if not words or wrong:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of read, write and terminal")
    return words


# ----------------------------------------------------------------------------------------------------------------
# The options several subcommands take.


def add_config(parser: argparse.ArgumentParser) -> None:
    """``--config``, of every subcommand that reads the config file."""
    from ._dirs import default_config_path  # here, for the subcommands that take it: `tinyacp --help` needs none

    parser.add_argument("--config", type=path, metavar="PATH", help=f"config file (default: {default_config_path()})")


def add_agent(parser: argparse.ArgumentParser) -> None:
    """``--agent``, ``--agent-command`` and ``--cwd``: the agent ``prompt``, ``chat`` and ``probe`` start."""
    parser.add_argument(
        "--agent",
        metavar="NAME",
        help='an agent name (see `tinyacp agents`), optionally with more arguments ("demo --delay 1"); '
        "a value with a space whose first word names no agent is run as a command line "
        "(default: the config's default_agent, else the built-in demo agent)",
    )
    parser.add_argument(
        "--agent-command",
        metavar='"CMD ARGS"',
        help="run this command line as the agent (split as a shell would, run without one)",
    )
    parser.add_argument("--cwd", default=".", metavar="DIR", help="the session's working directory (default: .)")


def add_permission_rules(rules: argparse._ArgumentGroup) -> None:
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


def add_serve_options(parser: argparse.ArgumentParser) -> None:
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


def add_sandbox_options(parser: argparse.ArgumentParser) -> None:
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


def add_otel_option(parser: argparse.ArgumentParser) -> None:
    """``--otel-endpoint``, of the subcommands that run turns (``prompt``, ``chat``, ``batch``)."""
    parser.add_argument(
        "--otel-endpoint",
        metavar="URL",
        help="export the run's OpenTelemetry spans over OTLP/HTTP to URL (default: as the OTEL_* variables say; "
        'needs pip install "tinyacp[otel]"; see docs/traces.md)',
    )
