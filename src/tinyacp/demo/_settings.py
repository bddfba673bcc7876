"""The demo agent's command line: `DemoSettings`, read without argparse when the line is plain (a quarter of the
agent's start saved), with argparse otherwise (``--help``, abbreviations, mistakes)."""

from __future__ import annotations

import os
import sys

from ._store import STATE_DIR_ENV

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

REQUIRE_AUTH_ENV = "TINYACP_DEMO_REQUIRE_AUTH"
PROG = "python -m tinyacp.demo"  # how --help names the agent unless told how it was started


class DemoSettings:
    """Command-line settings."""

    def __init__(
        self,
        *,
        delay: float = 0.0,
        chunks: int = 3,
        all_kinds: bool = False,
        verbose: bool = False,
        state_dir: str | None = None,
        require_auth: bool = False,
        extras: tuple[str, ...] = (),
    ) -> None:
        self.delay = delay
        self.chunks = chunks
        self.all_kinds = all_kinds
        self.verbose = verbose
        self.state_dir = state_dir
        self.require_auth = require_auth
        self.extras = extras


def _extras(value: str) -> tuple[str, ...]:
    """The names of ``--with NAME[,NAME...]`` (the registry is imported only when the option is given).

    Raises:
        ValueError: a name is not one of the features.
    """
    from ._words import parse_extras

    return parse_extras(value)


# What `plain_settings` knows of each option: its DemoSettings attribute, and how its value is read (None: a flag).
_OPTIONS: dict[str, tuple[str, Callable[[str], object] | None]] = {
    "--delay": ("delay", float),
    "--chunks": ("chunks", int),
    "--state-dir": ("state_dir", str),
    "--all-kinds": ("all_kinds", None),
    "--verbose": ("verbose", None),
    "--require-auth": ("require_auth", None),
    "--with": ("extras", _extras),
}


def parse_args(argv: Sequence[str] | None, prog: str = PROG) -> DemoSettings:
    args = sys.argv[1:] if argv is None else argv
    settings = plain_settings(args)
    if settings is None:
        settings = argparse_settings(args, prog)
    settings.require_auth = settings.require_auth or os.environ.get(REQUIRE_AUTH_ENV) == "1"
    return settings


def plain_settings(args: Sequence[str]) -> DemoSettings | None:
    """The settings of a plain, valid command line, read without argparse: with what it imports (gettext, locale,
    shutil), argparse would cost a quarter of the agent's start.

    Plain: whole option names, values given as ``--name VALUE`` or ``--name=VALUE``, none starting with ``-``.
    Returns None for anything else (``--help``, an abbreviation, a mistake): argparse reads those, as it always did.
    """
    settings = DemoSettings()
    words = iter(args)
    for word in words:
        name, equals, value = word.partition("=")
        if name not in _OPTIONS:
            return None
        attribute, read = _OPTIONS[name]
        if read is None:
            if equals:
                return None
            setattr(settings, attribute, True)
            continue
        if not equals:
            value = next(words, "-")
        if value.startswith("-"):
            return None
        try:
            setattr(settings, attribute, read(value))
        except ValueError:
            return None
    return settings if settings.delay >= 0 and settings.chunks >= 1 else None


def argparse_settings(args: Sequence[str], prog: str = PROG) -> DemoSettings:
    import argparse

    from . import _words

    parser = argparse.ArgumentParser(
        prog=prog,
        description="A deterministic ACP v1 agent on stdio, with no model: it lists the session's files.",
    )
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS", help="pause between updates")
    parser.add_argument("--chunks", type=int, default=3, metavar="N", help="message chunks per reply")
    parser.add_argument("--all-kinds", action="store_true", help="answer with all 11 update kinds")
    parser.add_argument("--verbose", action="store_true", help="log the traffic to stderr")
    parser.add_argument(
        "--state-dir", metavar="DIR", help=f"where sessions are kept (default: ${STATE_DIR_ENV}, else XDG)"
    )
    parser.add_argument(
        "--require-auth", action="store_true", help=f"answer -32000 until authenticate (also ${REQUIRE_AUTH_ENV}=1)"
    )

    def extras(value: str) -> tuple[str, ...]:
        try:
            return _extras(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parser.add_argument(
        "--with",
        dest="extras",
        type=extras,
        default=(),
        metavar="NAME[,NAME...]",
        help=f"add to every turn what the prompt word with-NAME adds: {', '.join(_words.EXTRAS)}",
    )
    parsed = parser.parse_args(args)
    if parsed.delay < 0:
        parser.error("--delay must be >= 0")
    if parsed.chunks < 1:
        parser.error("--chunks must be >= 1")
    return DemoSettings(
        delay=parsed.delay,
        chunks=parsed.chunks,
        all_kinds=parsed.all_kinds,
        verbose=parsed.verbose,
        state_dir=parsed.state_dir,
        require_auth=parsed.require_auth,
        extras=parsed.extras,
    )
