"""``tinyacp prompt`` and ``tinyacp chat``: their arguments, checked and made into the run's settings.

Imported when one of them runs, never for parsing: ``tinyacp --help`` and a usage error start without the client,
the display or the config reader.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
from pathlib import Path

from ..._limits import TransferLimits
from ..._messages import SystemPrompt
from ...reader import ReaderLimits
from ..agents._resolve import AgentSettings, AgentSpec, load_config, resolve_agent
from ..agents._session import SessionPlan
from ..shared._dirs import UnsafeDirectory, journal_dir, new_private_file, private_dir
from ..shared._display import isatty, sanitize
from ..shared._exit import UsageProblem
from ..shared._features import permission_policy, rule_notes
from ..shared._index import SessionIndex
from ..shared._text import text_argument, utf8_or_escaped, working_directory
from ._attachments import Attachment, read_attachment
from ._mcp import McpConfigError, read_mcp_config
from ._prompt import PromptSettings, run_prompt

__all__ = ["cmd_chat", "cmd_prompt"]

_DEFAULT_LIMITS = TransferLimits()


def _prompt_text(words: list[str]) -> str:
    if words == ["-"]:
        if isatty(sys.stdin):  # a person at a terminal would otherwise wait on a silent command
            print("tinyacp: reading the prompt from stdin (end it with Ctrl-D)", file=sys.stderr, flush=True)
        try:
            return sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageProblem(f"the prompt on stdin is not UTF-8: {exc}") from None
    return " ".join(words)


def _nonempty(text: str) -> str:
    if not text.strip():
        raise UsageProblem("the prompt is empty: nothing would be sent to the agent")
    return text


def _attachments(args: argparse.Namespace) -> tuple[Attachment, ...]:
    items = []
    for path, image in [(path, False) for path in args.file] + [(path, True) for path in args.image]:
        try:
            items.append(read_attachment(path, image=image))
        except OSError as exc:
            raise UsageProblem(f"{'--image' if image else '--file'} {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise UsageProblem(str(exc)) from None
    return tuple(items)


def _journal_path(args: argparse.Namespace, agent: AgentSpec) -> Path | None:
    if args.no_journal:
        return None
    if args.journal is not None:
        return Path(args.journal)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", agent.name)[:40] or "agent"
    try:
        return new_private_file(private_dir(journal_dir()), f"{stamp}-{name}", ".jsonl")
    except UnsafeDirectory as exc:
        raise UsageProblem(f"refusing the journal directory: {exc}") from None
    except OSError as exc:
        raise UsageProblem(f"cannot create the journal: {exc} (use --journal PATH or --no-journal)") from None


def _limits(args: argparse.Namespace) -> tuple[ReaderLimits, TransferLimits]:
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


def _run_settings(args: argparse.Namespace, text: str, *, chat: bool = False) -> PromptSettings:
    """What ``prompt`` and ``chat`` are asked to do, checked: a usage error here starts no agent."""
    _check_texts(args, text)
    agent = resolve_agent(args.agent, load_config(args.config), command=args.agent_command)
    cwd = working_directory(args.cwd)
    attachments = () if chat else _attachments(args)
    reader_limits, transfer_limits = _limits(args)
    _check_prompt_size(text, transfer_limits.max_message_bytes)
    terminal = isatty(sys.stdin) and isatty(sys.stderr)
    plan = _plan(args, agent, cwd)
    policy = permission_policy(args, agent.allow_tools, agent.deny_tools)
    for line in rule_notes(agent.name, agent.notes, policy):
        print(f"tinyacp: {sanitize(line)}", file=sys.stderr)
    return PromptSettings(
        agent=agent,
        text=text,
        cwd=cwd,
        attachments=attachments,
        policy=policy,
        ask=terminal and not args.yes and not args.no_input,
        questions=terminal and not args.no_input,
        no_ask_reason="--no-input was given" if args.no_input else "there is no terminal to ask",
        json=not chat and args.format == "json",
        quiet=args.quiet,
        timeout=args.timeout,
        cancel_grace=args.cancel_grace,
        kill_grace=args.kill_grace,
        journal=_journal_path(args, agent),
        sync_journal=args.sync_journal,
        reader_limits=reader_limits,
        transfer_limits=transfer_limits,
        agent_log=args.agent_log,
        plan=plan,
        index=SessionIndex(),
        agent_key=agent.key,
        startup_timeout=args.startup_timeout,
        fail_on_reject=not chat and args.fail_on_reject,
    )


def _check_texts(args: argparse.Namespace, text: str) -> None:
    """The text arguments that go into ACP messages are UTF-8 (the prompt read from stdin already is)."""
    text_argument("the prompt", text)
    for flag in ("system_prompt", "mode", "model", "auth"):
        text_argument(f"--{flag.replace('_', '-')}", getattr(args, flag, None))
    for item in getattr(args, "options", None) or []:
        text_argument(f"--set {utf8_or_escaped(item)!r}", item)


def _check_prompt_size(text: str, limit: int) -> None:
    """A prompt whose text alone is longer than one message may be is refused before the agent starts (the
    attachments, whose form depends on what the agent accepts, are checked when the prompt is sent)."""
    import msgspec

    size = len(msgspec.json.encode(text))
    if size > limit:
        raise UsageProblem(
            f"the prompt is {size:,} bytes as JSON, more than one message may carry ({limit:,} bytes, "
            "--max-message-bytes): nothing was sent; shorten the prompt or raise --max-message-bytes"
        )


def _plan(args: argparse.Namespace, agent: AgentSpec, cwd: Path) -> SessionPlan:
    """The session to open and its settings: the flags, over the agent's entry in the config file."""
    options = {}
    for item in args.options:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageProblem(f"--set {item!r}: expected KEY=VALUE")
        options[key.strip()] = value
    given = AgentSettings(
        auth=args.auth,
        mode=args.mode,
        model=args.model,
        options=options,
        mcp_config=args.mcp_config,
        system_prompt=args.system_prompt,
        system_prompt_mode=args.system_prompt_mode or "append",
    )
    settings = given.over(agent.settings)
    if args.system_prompt_mode is None:
        settings = dataclasses.replace(settings, system_prompt_mode=agent.settings.system_prompt_mode)
    try:
        mcp_servers = tuple(read_mcp_config(settings.mcp_config)) if settings.mcp_config is not None else ()
    except McpConfigError as exc:
        raise UsageProblem(str(exc)) from None
    system_prompt = None
    if settings.system_prompt is not None:
        override = settings.system_prompt_mode == "override"
        system_prompt = SystemPrompt(settings.system_prompt, "override" if override else "append")
    return SessionPlan(
        cwd=cwd,
        mcp_servers=mcp_servers,
        auth=settings.auth,
        session_id=args.session,
        continue_last=args.continue_last,
        fork=args.fork,
        mode=settings.mode,
        model=settings.model,
        options=settings.options,
        system_prompt=system_prompt,
    )


def cmd_prompt(args: argparse.Namespace) -> int:
    """``tinyacp prompt``."""
    text = _nonempty(_prompt_text(args.text))
    return run_prompt(_run_settings(args, text))


def cmd_chat(args: argparse.Namespace) -> int:
    """``tinyacp chat``: many turns in one session, on a terminal."""
    if not (isatty(sys.stdin) and isatty(sys.stderr)):
        raise UsageProblem("tinyacp chat needs a terminal; in a script, use `tinyacp prompt` (one turn per run)")
    from ._chat import run_chat

    return run_chat(_run_settings(args, "", chat=True))
