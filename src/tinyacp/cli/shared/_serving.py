"""Files and terminals served on the command's side: the :class:`~tinyacp.Serve` of ``--serve``, ``--root``,
``--allow-command`` and ``--deny-command`` (with the agent's keys in ``config.toml`` added to them), and a served
action in words for the terminal (sanitised: a path or a command line comes from the agent)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..._serve import Serve, ServeRequest
from ._display import one_line
from ._exit import UsageProblem

if TYPE_CHECKING:
    from ..._sandbox import Bubblewrap

__all__ = ["SERVABLE", "action_words", "serve_of"]

SERVABLE = ("read", "write", "terminal")
"""What ``--serve`` takes, comma-separated."""


def serve_of(
    args: argparse.Namespace,
    served: Iterable[str] = (),
    roots: Iterable[str] = (),
    allow_commands: Iterable[str] = (),
    deny_commands: Iterable[str] = (),
    *,
    sandbox: Bubblewrap | None = None,
) -> Serve:
    """The :class:`~tinyacp.Serve` of the flags, with what the agent's entry in ``config.toml`` serves added; its
    terminals' commands run in ``sandbox`` (the run's ``--sandbox``) when one is given.

    Raises:
        UsageProblem: a word ``--serve`` does not take (the config's; the flags' are checked by the parser), a
            root that is not a directory, or ``--root``/``--allow-command``/``--deny-command`` with nothing served
            that they would apply to.
    """
    words = set(served)
    for given in args.serve:
        words.update(given)
    unknown = sorted(words - set(SERVABLE))
    if unknown:
        raise UsageProblem(f"serve: {', '.join(map(repr, unknown))} is not one of {', '.join(SERVABLE)}")
    folders = [*roots, *args.root]
    for folder in folders:
        if not os.path.isdir(folder):
            raise UsageProblem(f"--root {folder}: not a directory")
    commands = [*allow_commands, *args.allow_command]
    denied = [*deny_commands, *args.deny_command]
    if (args.root and not words & {"read", "write", "terminal"}) or (
        (args.allow_command or args.deny_command) and "terminal" not in words
    ):
        flag = "--root" if args.root and not words else "--allow-command/--deny-command"
        raise UsageProblem(
            f"{flag} applies to what is served: add --serve {'terminal' if 'command' in flag else 'read'}"
        )
    return Serve(
        read="read" in words,
        write="write" in words,
        terminal="terminal" in words,
        roots=folders,
        commands=commands or None,
        deny_commands=denied,
        sandbox=sandbox,
    )


def action_words(request: ServeRequest, width: int = 300) -> str:
    """What the agent asks the client to do, in words: ``read PATH``, ``write PATH (N bytes; new file)``,
    ``run LINE in CWD``."""
    if request.kind == "execute":
        where = f" in {one_line(request.cwd or '', 120)}" if request.cwd else ""
        return f"run {one_line(request.line or '', width)}{where}"
    path = one_line(request.path or "", width)
    if request.kind == "read":
        lines = ""
        if request.line_number is not None or request.limit is not None:
            lines = f" (lines {request.line_number or 1}" + (f"+{request.limit})" if request.limit else "-)")
        return f"read {path}{lines}"
    prior = request.prior
    was = "" if prior is None else "; new file" if not prior.exists else f"; was {prior.size:,} bytes"
    return f"write {path} ({request.size or 0:,} bytes{was})"
