"""``tinyacp batch``'s settings: what the batch is asked to do, and how the parsed arguments and the config file
become it, in one pass.

:func:`batch_settings` reads top to bottom. First the files the command names (the items, the output directory);
then what they name, looked up once each: the config file, the agent of items that name none (checked as
``--agent`` is, with "did you mean"), the working directory, the sandbox, what is served, the trace, the
permission policy. Every usage error comes before the progress line and the first turn. A new option of
``batch`` is declared in :mod:`tinyacp.cli.batch._args`, read here, and becomes a field of
:class:`BatchSettings`.
"""

from __future__ import annotations

import argparse
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..._files import not_regular, open_regular_binary
from ..._permissions import PermissionPolicy
from ..._serve import Serve
from ..agents._load import load_config
from ..agents._resolve import AgentSpec, resolve_agent
from ..shared._exit import UsageProblem
from ..shared._features import permission_policy
from ..shared._sandbox import batch_sandbox
from ..shared._serving import serve_of
from ..shared._text import utf8_or_escaped
from ..shared._trace import trace_export

if TYPE_CHECKING:
    from ..._sandbox import Bubblewrap
    from ...otel._config import TraceExport

__all__ = ["BatchSettings", "batch_settings"]


@dataclass(frozen=True)
class BatchSettings:
    """Everything ``tinyacp batch`` was asked to do, checked and read."""

    file: Path
    """The items, one JSON object per line: a regular file with at least one line that is not blank."""
    out: Path
    """Where ``results.jsonl`` and ``journals/`` go (made if missing)."""
    agent: str
    """The agent of items that name none: ``--agent``, else the config file's ``default_agent``."""
    agents: dict[str, AgentSpec]
    """The agents known by name, but the built-in demo: the node running a turn starts it with its own Python."""
    cwd: str | None
    concurrency: int
    engine: Literal["local", "ray"]
    ray_address: str | None
    retries: int
    retry_failed: bool
    timeout: float | None
    sync_journal: bool
    json: bool
    """``--format json``: the records stream to stdout as they are written."""
    quiet: bool
    sandbox: Bubblewrap | None
    """The turns' sandbox (``--sandbox``, or the default agent's config entry), or None."""
    serve: Serve
    """The files and terminals served to the agents: the flags' (the config keys are ``prompt``'s and ``chat``'s)."""
    trace: TraceExport | None
    """Where the batch's spans go (``--otel-endpoint``, the OTEL_* variables); None: no export."""
    policy: PermissionPolicy


def batch_settings(args: argparse.Namespace) -> BatchSettings:
    """What ``batch`` is asked to do, checked: a usage error here starts no turn.

    Raises:
        UsageProblem: the items file or ``--out`` cannot be used, or an argument, the config file or a file it
            names cannot; the message says which and why.
    """
    # The files the command names.
    problem = _unusable(args.file, args.out)
    if problem is not None:
        raise UsageProblem(problem)
    # What the arguments name, looked up once each.
    config = load_config(args.config)
    agent = resolve_agent(args.agent, config)  # None: the config's default_agent, named as coming from the file
    if args.cwd is not None and not Path(args.cwd).is_dir():
        raise UsageProblem(f"--cwd {args.cwd}: not a directory")
    sandbox = batch_sandbox(args, agent.sandbox)
    return BatchSettings(
        file=args.file,
        out=args.out,
        agent=args.agent or config.default_agent,
        agents={name: spec for name, spec in config.agents.items() if spec.source != "built-in" or name != "demo"},
        cwd=args.cwd,
        concurrency=args.concurrency,
        engine=args.engine,
        ray_address=args.ray_address,
        retries=args.retries,
        retry_failed=args.retry_failed,
        timeout=args.timeout,
        sync_journal=args.sync_journal,
        json=args.format == "json",
        quiet=args.quiet,
        sandbox=sandbox.agent,
        serve=serve_of(args, sandbox=sandbox.commands),
        trace=trace_export(args),
        policy=permission_policy(args),
    )


def _unusable(file: Path, out: Path) -> str | None:
    """Why the batch cannot start from these paths: the items file does not exist, is not a regular file (a
    directory, a FIFO, ...) or has no items (it is empty, or blank lines only); ``--out`` exists and is not a
    directory (it is made if missing). None when both can be used. A name is shown with the bytes that are not
    UTF-8 escaped, so the user can tell which."""
    name, out_name = utf8_or_escaped(os.fspath(file)), utf8_or_escaped(os.fspath(out))
    try:
        status = os.stat(file)
    except FileNotFoundError:
        return f"{name}: does not exist"
    except OSError as exc:
        return f"{name}: {exc.strerror or exc}"
    if not stat.S_ISREG(status.st_mode):
        return f"{name}: {not_regular(file, status.st_mode).strerror}"
    try:
        with open_regular_binary(file) as items:
            if not any(line.strip() for line in items):
                return f"{name}: has no items (a batch file is one JSON object per line)"
    except OSError:  # said by the batch itself, with the path
        pass
    if os.path.exists(out) and not os.path.isdir(out):
        return f"--out {out_name}: must be a directory (it is a file): results.jsonl and the journals are written there"
    return None
