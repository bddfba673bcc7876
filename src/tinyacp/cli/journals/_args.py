"""The command line of ``tinyacp show``, ``journals``, ``view`` and ``export``.

``tinyacp --help`` imports this module: it imports argparse and the parser's helpers alone.
"""

from __future__ import annotations

import argparse

from ..shared._args import Subcommands, lazy_handler, path, positive, size

__all__ = ["add_export", "add_journals", "add_show", "add_view"]


def add_show(commands: Subcommands) -> None:
    """``tinyacp show``: a journal as a readable conversation."""
    commands.add(
        "show",
        _show_options,
        help="render a journal as a readable conversation",
        description="Print a journal as a readable conversation: each prompt, the agent's plan, thoughts, tool calls, "
        "permission decisions (and who made them) and its reply.",
    )


def add_journals(commands: Subcommands) -> None:
    """``tinyacp journals``: the journals of the runs, and ``--prune``."""
    commands.add(
        "journals",
        _journals_options,
        help="list the journals of your runs (size, age, agent, session); --prune removes old ones",
        description="List the journals `tinyacp prompt` and `chat` wrote to the journal directory, newest first. "
        "--prune --older-than 30d removes those last written before then, and says how much it freed.",
    )


def add_view(commands: Subcommands) -> None:
    """``tinyacp view``: a batch or journals as one HTML page."""
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


def add_export(commands: Subcommands) -> None:
    """``tinyacp export``: journals sent to a trace backend."""
    commands.add(
        "export",
        _export_options,
        help="send a journal or a batch's directory to an OpenTelemetry backend as traces (OTLP/HTTP)",
        description="Send what a journal (or each journal of a batch's directory) recorded as the spans a traced "
        "run makes, with the recorded times; ids are derived from the files, so the same journal always gives "
        "the same spans. See docs/traces.md.",
    )


def _show_options(show: argparse.ArgumentParser) -> None:
    show.add_argument(
        "journal",
        type=path,
        metavar="JOURNAL",
        help="a journal file; `last`: the latest journal; a session id: the latest journal of that session",
    )
    show.add_argument("--format", choices=("text", "json"), default="text")
    show.set_defaults(handler=lazy_handler("tinyacp.cli.journals._show", "cmd_show"))


def _journals_options(journals: argparse.ArgumentParser) -> None:
    journals.add_argument("--limit", type=positive, metavar="N", help="only the N newest")
    journals.add_argument("--format", choices=("text", "json"), default="text")
    journals.add_argument("--prune", action="store_true", help="remove the journals older than --older-than")
    journals.add_argument("--older-than", metavar="AGE", help="with --prune: an age such as 30d, 12h, 2w")
    journals.add_argument("--dry-run", action="store_true", help="with --prune: say what would go, remove nothing")
    journals.add_argument(
        "--all", action="store_true", help="with --prune: remove every journal (an --older-than of 0 needs it)"
    )
    journals.set_defaults(handler=lazy_handler("tinyacp.cli.journals._journals", "cmd_journals"))


def _view_options(view: argparse.ArgumentParser) -> None:
    view.add_argument(
        "path",
        type=path,
        nargs="*",
        metavar="PATH",
        help="a batch's --out directory, a journal, or a directory of journals (default: the journals of tinyacp "
        "prompt and chat); two or more batch directories: one page comparing them item by item",
    )
    view.add_argument(
        "-o",
        "--output",
        type=path,
        metavar="FILE",
        help="the page to write (default: report.html in a batch's directory, else ./tinyacp-view.html)",
    )
    view.add_argument("--open", action="store_true", help="open the page in the system's browser")
    view.add_argument(
        "--max-turn-bytes",
        type=size,
        default=256 * 1024,
        metavar="SIZE",
        help="text of each turn's transcript kept in the page (default 256K; the page says what it cut)",
    )
    view.set_defaults(handler=lazy_handler("tinyacp.cli.journals._view", "cmd_view"))


def _export_options(export: argparse.ArgumentParser) -> None:
    export.add_argument("path", type=path, metavar="JOURNAL|BATCH_DIR", help="a journal, or a batch's --out directory")
    export.add_argument(
        "--otlp",
        required=True,
        metavar="URL",
        help="the backend's OTLP/HTTP endpoint (http://HOST:4318, or …/v1/traces)",
    )
    export.add_argument(
        "--capture-content", action="store_true", help="put the prompts' and replies' text in the spans (default: no)"
    )
    export.set_defaults(handler=lazy_handler("tinyacp.cli.journals._export", "cmd_export"))
