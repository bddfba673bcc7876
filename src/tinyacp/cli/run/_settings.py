"""``tinyacp prompt``'s and ``tinyacp chat``'s settings: what the run is asked to do, and how the parsed arguments
and the config file become it, in one pass.

:func:`prompt_settings` reads top to bottom. First what the flags say on their own, checked against each other
(the prompt, the limits, ``--set``, the texts ACP carries); then what they name, looked up once each: the working
directory, the agent (the config file, then ``--agent`` or ``--agent-command``), the files sent with the prompt,
the session to open (each flag, else the agent's entry in the config file), the permission policy (and the agent's
notes), the sandbox, the startup deadline, the journal, what is served, the trace.
Every usage error comes before the agent starts. A new option of ``prompt`` and ``chat`` is declared in
:mod:`tinyacp.cli.run._args` (or, when ``batch`` takes it too, :mod:`tinyacp.cli.shared._args`), read here, and
becomes a field of :class:`PromptSettings`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..._limits import TransferLimits
from ..._messages import SystemPrompt
from ..._permissions import PermissionPolicy
from ..._serve import Serve
from ...reader import ReaderLimits
from ..agents._load import load_config
from ..agents._resolve import AgentSpec, resolve_agent
from ..agents._session import SessionPlan
from ..shared._dirs import new_journal
from ..shared._display import isatty, sanitize
from ..shared._exit import UsageProblem
from ..shared._features import agent_policy
from ..shared._index import SessionIndex
from ..shared._sandbox import run_sandbox
from ..shared._serving import serve_of
from ..shared._text import text_argument, utf8_or_escaped, working_directory
from ..shared._trace import trace_export
from ._attachments import Attachment, read_attachments
from ._mcp import read_mcp_config

if TYPE_CHECKING:
    from ..._sandbox import Bubblewrap, Plan
    from ...otel._config import TraceExport

__all__ = ["PromptSettings", "prompt_settings"]


@dataclass(frozen=True)
class PromptSettings:
    """Everything ``tinyacp prompt`` (or ``chat``) was asked to do, checked and read."""

    agent: AgentSpec
    text: str
    cwd: Path
    attachments: tuple[Attachment, ...] = ()
    policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    ask: bool = False
    questions: bool = False
    """Whether the agent's questions (``elicitation/create``: forms, and links to open) are asked on the terminal
    (else declined; and links are not advertised)."""
    open_urls: bool = False
    """``--open-urls``: a link the agent asks the person to visit is opened in the browser (http and https only)."""
    no_ask_reason: str = "there is no terminal to ask"
    """Why requests the policy does not allow are rejected without asking, when ``ask`` is False."""
    json: bool = False
    quiet: bool = False
    timeout: float | None = None
    cancel_grace: float = 5.0
    kill_grace: float = 2.0
    journal: Path | None = None
    journal_own: bool = False
    """Whether ``journal`` is the run's own new file (not ``--journal PATH``): a run refused before its prompt
    removes it, so ``journals`` and ``show last`` list only runs that prompted (or failed on the agent's side)."""
    sync_journal: bool = False
    reader_limits: ReaderLimits = field(default_factory=ReaderLimits)
    transfer_limits: TransferLimits = field(default_factory=TransferLimits)
    agent_log: Path | None = None
    plan: SessionPlan = field(default_factory=lambda: SessionPlan(Path.cwd()))
    """How to open the session (new or continued, MCP servers, login) and the settings to apply in it."""
    index: SessionIndex | None = None
    """Where the session is noted for ``--continue`` (None: nowhere)."""
    agent_key: str = ""
    """The agent's name in the index of sessions (its command line when it has no name)."""
    startup_timeout: float | None = 120.0
    """The deadline of ``initialize``: an ``npx`` cold start downloads the adapter first."""
    fail_on_reject: bool = False
    sandbox: Bubblewrap | None = None
    """The agent's sandbox (``--sandbox``, or its config entry), or None."""
    sandbox_plan: Plan | None = None
    """How bwrap starts it, as the live line and the journal's epoch record say."""
    serve: Serve = field(default_factory=Serve)
    """The files and terminals served to the agent (``--serve``, ``--root``, ``--allow-command``, ...)."""
    trace: TraceExport | None = None
    """Where the run's spans go (``--otel-endpoint``, the OTEL_* variables); None: no export."""


_DEFAULT_LIMITS = TransferLimits()


def prompt_settings(args: argparse.Namespace, *, chat: bool = False) -> PromptSettings:
    """What ``prompt`` (or, with ``chat``, ``chat``) is asked to do, checked: a usage error here starts no agent.

    Raises:
        UsageProblem: an argument, the config file, a file named by a flag or the journal directory cannot be
            used; the message says which and why.
    """
    # What the flags say on their own.
    text = "" if chat else _prompt_text(args.text)
    reader_limits, transfer_limits = _limits(args)
    options = _set_options(args.options)
    _check_texts(args, text, transfer_limits.max_message_bytes)
    # What they name, looked up once each.
    cwd = working_directory(args.cwd)
    config = load_config(args.config)
    agent = resolve_agent(args.agent, config, command=args.agent_command)
    attachments = () if chat else read_attachments(args.file, args.image)
    entry = agent.settings  # the agent's entry in the config file: a flag wins over it
    mcp_config = args.mcp_config if args.mcp_config is not None else entry.mcp_config
    system_text = args.system_prompt if args.system_prompt is not None else entry.system_prompt
    system_mode = args.system_prompt_mode or entry.system_prompt_mode
    plan = SessionPlan(
        cwd=cwd,
        mcp_servers=tuple(read_mcp_config(mcp_config)) if mcp_config is not None else (),
        auth=args.auth if args.auth is not None else entry.auth,
        session_id=args.session,
        continue_last=args.continue_last,
        fork=args.fork,
        mode=args.mode if args.mode is not None else entry.mode,
        model=args.model if args.model is not None else entry.model,
        options={**entry.options, **options},
        system_prompt=None
        if system_text is None
        else SystemPrompt(system_text, "override" if system_mode == "override" else "append"),
    )
    policy, notes = agent_policy(args, agent.name, agent.allow_tools, agent.deny_tools, agent.notes)
    for line in notes:
        print(f"tinyacp: {sanitize(line)}", file=sys.stderr)
    terminal = isatty(sys.stdin) and isatty(sys.stderr)
    sandbox = run_sandbox(args, agent.sandbox, agent.command, agent.env, cwd)
    # --startup-timeout, else the default of the agent's kind: an npx/uvx first start downloads the package (two
    # minutes), any other program starts here or is stuck (half a minute).
    startup_timeout = args.startup_timeout
    if startup_timeout is None:
        startup_timeout = args.download_startup_timeout if agent.downloads else args.local_startup_timeout
    return PromptSettings(
        agent=agent,
        text=text,
        cwd=cwd,
        attachments=attachments,
        policy=policy,
        ask=terminal and not args.yes and not args.no_input,
        questions=terminal and not args.no_input,
        open_urls=args.open_urls,
        no_ask_reason="--no-input was given" if args.no_input else "there is no terminal to ask",
        json=not chat and args.format == "json",
        quiet=args.quiet,
        timeout=args.timeout,
        cancel_grace=args.cancel_grace,
        kill_grace=args.kill_grace,
        journal=None if args.no_journal else args.journal or new_journal(agent.name),
        journal_own=not args.no_journal and args.journal is None,
        sync_journal=args.sync_journal,
        reader_limits=reader_limits,
        transfer_limits=transfer_limits,
        agent_log=args.agent_log,
        plan=plan,
        index=SessionIndex(),
        agent_key=agent.key,
        startup_timeout=float(startup_timeout),
        fail_on_reject=not chat and args.fail_on_reject,
        sandbox=sandbox.agent,
        sandbox_plan=sandbox.plan,
        serve=serve_of(
            args, agent.serve, agent.roots, agent.allow_commands, agent.deny_commands, sandbox=sandbox.commands
        ),
        trace=trace_export(args),
    )


def _prompt_text(words: list[str]) -> str:
    """The prompt: the words given, or with ``-`` stdin, read whole; never empty."""
    if words == ["-"]:
        if isatty(sys.stdin):  # a person at a terminal would otherwise wait on a silent command
            print("tinyacp: reading the prompt from stdin (end it with Ctrl-D)", file=sys.stderr, flush=True)
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageProblem(f"the prompt on stdin is not UTF-8: {exc}") from None
    else:
        text = " ".join(words)
    if not text.strip():
        raise UsageProblem("the prompt is empty: nothing would be sent to the agent")
    return text


def _limits(args: argparse.Namespace) -> tuple[ReaderLimits, TransferLimits]:
    """The line limit and the transfer limits; ``--max-update-bytes`` follows a lowered ``--max-line``."""
    max_update = args.max_update_bytes
    if max_update is None:  # follow a lowered line limit: an update can never be longer than a line
        max_update = min(_DEFAULT_LIMITS.max_update_bytes, args.max_line)
    if max_update > args.max_line:
        raise UsageProblem(f"--max-update-bytes ({max_update}) may not exceed --max-line ({args.max_line})")
    transfer = TransferLimits(
        max_message_bytes=args.max_message_bytes,
        max_update_bytes=max_update,
        max_updates=args.max_updates,
        max_reply_bytes=args.max_reply_bytes,
        max_reply_chunks=args.max_reply_chunks,
        max_notices=args.max_notices,
        max_notice_bytes=args.max_notice_bytes,
        max_subagents=args.max_subagents,
        max_subagent_bytes=args.max_subagent_bytes,
    )
    return ReaderLimits(max_line=args.max_line), transfer


def _set_options(items: list[str]) -> dict[str, str]:
    """``--set KEY=VALUE``, each, by key (a later one wins)."""
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageProblem(f"--set {item!r}: expected KEY=VALUE")
        options[key.strip()] = value
    return options


def _check_texts(args: argparse.Namespace, text: str, max_message_bytes: int) -> None:
    """The text arguments that go into ACP messages are UTF-8 (the prompt read from stdin already is), and the
    prompt's text alone fits in one message (the attachments, whose form depends on what the agent accepts, are
    checked when the prompt is sent)."""
    text_argument("the prompt", text)
    for flag in ("system_prompt", "mode", "model", "auth"):
        text_argument(f"--{flag.replace('_', '-')}", getattr(args, flag))
    for item in args.options:
        text_argument(f"--set {utf8_or_escaped(item)!r}", item)
    import msgspec  # here: the parser and a usage error found earlier do not need it

    size = len(msgspec.json.encode(text))
    if size > max_message_bytes:
        raise UsageProblem(
            f"the prompt is {size:,} bytes as JSON, more than one message may carry ({max_message_bytes:,} bytes, "
            "--max-message-bytes): nothing was sent; shorten the prompt or raise --max-message-bytes"
        )
