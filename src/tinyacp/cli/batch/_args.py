"""The command line of ``tinyacp batch``. The permission rules, the files and terminals served, the sandbox and
``--otel-endpoint`` are ``prompt``'s too, declared in ``cli/shared/_args.py``.

``tinyacp --help`` imports this module: it imports argparse and the parser's helpers alone.
"""

from __future__ import annotations

import argparse

from ..shared._args import (
    Subcommands,
    add_config,
    add_otel_option,
    add_permission_rules,
    add_sandbox_options,
    add_serve_options,
    concurrency,
    count,
    lazy_handler,
    path,
    seconds,
)
from ..shared._exit import BATCH_EXIT_STATUS

__all__ = ["add_batch"]


def add_batch(commands: Subcommands) -> None:
    """``tinyacp batch``: many prompts from a JSONL file, resumably."""
    commands.add(
        "batch",
        _batch_options,
        help="run many prompts from a JSONL file, resumably (local or on Ray)",
        description="tinyacp batch FILE.jsonl --out DIR: run many prompts, resumably, and summarise them.",
        epilog=BATCH_EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _batch_options(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    parser.add_argument("file", type=path, metavar="FILE.jsonl", help="the items, one JSON object per line")
    parser.add_argument("--out", type=path, required=True, metavar="DIR", help="results.jsonl and journals/ go here")
    parser.add_argument("--agent", metavar='NAME|"CMD ARGS"', help="the agent of items that name none")
    parser.add_argument("--cwd", metavar="DIR", help="the working directory of items that give none (default: .)")
    parser.add_argument("--concurrency", type=concurrency, default=4, metavar="N", help="turns at once (default 4)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local", help="where turns run")
    parser.add_argument("--ray-address", metavar="ADDR", help="the Ray cluster to join (default: start one)")
    parser.add_argument("--retry-failed", action="store_true", help="run again the items whose record is not ok")
    parser.add_argument("--retries", type=count, default=0, metavar="N", help="extra attempts per failed turn")
    parser.add_argument("--timeout", type=seconds, metavar="SECONDS", help="deadline of each turn")
    parser.add_argument(
        "--sync-journal", action="store_true", help="fsync every journal record (default: at permission decisions)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="json: stream the records")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line, no summary table")
    add_otel_option(parser)
    rules = parser.add_argument_group("permissions (nobody is asked: what no rule allows is rejected)")
    add_permission_rules(rules)
    rules.add_argument("--no-input", action="store_true", help="never ask (always so in a batch)")
    add_sandbox_options(parser)
    add_serve_options(parser)
    parser.set_defaults(handler=lazy_handler("tinyacp.cli.batch._command", "cmd_batch"))
