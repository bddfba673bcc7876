"""``tinyacp prompt`` and ``tinyacp chat``: their settings (:mod:`tinyacp.cli.run._settings`), then the run.

Imported when one of them runs, never for parsing: ``tinyacp --help`` and a usage error start without the client,
the display or the config reader.
"""

from __future__ import annotations

import argparse
import sys

from ..shared._display import isatty
from ..shared._exit import UsageProblem
from ._prompt import run_prompt
from ._settings import prompt_settings

__all__ = ["cmd_chat", "cmd_prompt"]


def cmd_prompt(args: argparse.Namespace) -> int:
    """``tinyacp prompt``: one turn."""
    settings = prompt_settings(args)
    return run_prompt(settings)


def cmd_chat(args: argparse.Namespace) -> int:
    """``tinyacp chat``: many turns in one session, on a terminal."""
    if not (isatty(sys.stdin) and isatty(sys.stderr)):
        raise UsageProblem("tinyacp chat needs a terminal; in a script, use `tinyacp prompt` (one turn per run)")
    from ._chat import run_chat

    settings = prompt_settings(args, chat=True)
    return run_chat(settings)
