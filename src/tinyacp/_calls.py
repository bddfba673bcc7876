"""The public calls of both clients, each written once: its signature, its docstring and what it asks the core for.

A call here takes the client and returns a :class:`~tinyacp._shell.CallSpec`: how to build the request in the core,
its timeout, whether it is a prompt. Each shell makes it a method with its own small adapter (``blocking`` in
:mod:`tinyacp._client` waits for the answer; ``awaitable`` in :mod:`tinyacp._async_client` awaits it;
``streaming`` in each returns that shell's prompt stream, which runs the call), and :func:`method_of` gives that
method the call's name, docstring and signature. So ``Client.new_session`` and ``AsyncClient.new_session`` take
the same arguments, say the same thing, and differ only in how they wait. What any call may raise is written once
too, here and nowhere else, and added to each call's ``Raises:`` list.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from ._conversation import Call, Meta
from ._messages import (
    AnyMcpServer,
    ConfigOption,
    Initialize,
    LoadedSession,
    PromptContent,
    Session,
    SessionPage,
    SystemPrompt,
)
from ._records import PromptResult
from ._shell import CallSpec, ShellBase

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


_SPEC = f"{CallSpec.__name__}["


def method_of(owner: str, call: Callable[..., CallSpec[Any]], method: F, returns: str | None = None) -> F:
    """``method``, a shell's adapter of ``call``, shown as the call itself: its name and docstring, and its
    signature with ``self`` first and the answer's type (or ``returns``) as the result (what ``help()``, IDEs and
    the API reference show)."""
    functools.update_wrapper(method, call)
    method.__qualname__ = f"{owner}.{call.__name__}"
    signature = inspect.signature(call)
    answer = signature.return_annotation  # a string: annotations here are not evaluated
    if not (isinstance(answer, str) and answer.startswith(_SPEC) and answer.endswith("]")):
        raise TypeError(f"{call.__name__} must be annotated to return {_SPEC}...]")
    shell, *parameters = signature.parameters.values()
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]  # read by inspect.signature
        parameters=[shell.replace(name="self", annotation=inspect.Parameter.empty), *parameters],
        return_annotation=returns or answer[len(_SPEC) : -1],
    )
    return method


R = TypeVar("R")
P = ParamSpec("P")


def streaming(
    owner: str,
    stream: Callable[[Any, CallSpec[PromptResult]], R],
    call: Callable[Concatenate[ShellBase, P], CallSpec[PromptResult]],
) -> Callable[Concatenate[Any, P], R]:
    """``call`` as a method of the shell ``owner`` that returns ``stream(client, spec)``: that shell's prompt
    stream, which runs the call when it is iterated."""

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return stream(self, call(self, *args, **kwargs))

    return method_of(owner, call, method, returns=getattr(stream, "__name__", None))


_EVERY_CALL_RAISES = """\
        AgentExited: the agent exited, closed its input or output, or ``kill()`` stopped it (what it wrote before
            is recorded first; the agent is torn down).
        AgentTimeout: the deadline passed (a call other than a prompt sends ``$/cancel_request`` for it, best
            effort, and leaves the client usable when its line was written whole).
        ObserverError: an observer method, or its ``flush``, raised (the agent is torn down).
        ClientBusy: another call is in flight, or the call is made from inside an observer method.
        ClientClosed: the client was closed or torn down.
        ReaderExhaustion: a line passed the reader's limit (the agent is torn down).
        TransferLimitExceeded: an update passed ``max_update_bytes`` or ``max_updates``.
        ProtocolViolation: the answer cannot be used (the client stays usable).
        ValueError: ``timeout`` is nan, infinite, negative, over 1,000,000 seconds or not a number (nothing is
            written).
"""
"""What any call may raise, in the indentation of a module-level docstring's ``Raises:`` entries."""

C = TypeVar("C", bound=Callable[..., CallSpec[Any]])


def _raises_also(call: C) -> C:
    """``call`` with what any call may raise added at the end of its docstring's ``Raises:`` list (its last
    section), but for the errors it names itself with a meaning of its own."""
    doc = call.__doc__ or ""
    # The section's indentation: Python 3.13 strips a docstring's common indentation (4 spaces less here).
    section = re.search(r"^( *)Raises:\n", doc, flags=re.MULTILINE)
    indent = section.group(1) if section is not None else ""
    if section is None or not doc.rstrip().splitlines()[-1].startswith(indent + "    "):
        raise TypeError(f"{call.__name__}'s docstring must end with its Raises: list")
    named = set(re.findall(rf"^{indent} {{4}}(\w+):", doc[section.end() :], flags=re.MULTILINE))
    # One entry per error: its first line at the entries' indentation, its continuation lines deeper.
    entries = re.findall(r"^ {8}\S.*\n(?: {12}.*\n)*", _EVERY_CALL_RAISES, flags=re.MULTILINE)
    also = [entry for entry in entries if entry.split(":")[0].strip() not in named]
    lines = [indent + line[4:] + "\n" for entry in also for line in entry.splitlines()]  # 4 deeper than Raises:
    call.__doc__ = doc.rstrip() + "\n" + "".join(lines) + indent
    return call


def _raises_like(model: Callable[..., Any]) -> Callable[[C], C]:
    """``call`` with the whole ``Raises:`` list of ``model`` (what any call may raise included) as its last section,
    for a call that raises what ``model`` does."""

    def apply(call: C) -> C:
        doc = model.__doc__ or ""
        section = re.search(r"^ *Raises:\n", doc, flags=re.MULTILINE)  # as indented as ``call``'s own sections
        if section is None:
            raise TypeError(f"{model.__name__}'s docstring has no Raises: list")
        call.__doc__ = (call.__doc__ or "").rstrip() + "\n\n" + doc[section.start() :]
        return call

    return apply


def _paths(
    shell: ShellBase, cwd: str | os.PathLike[str], additional_directories: Sequence[str | os.PathLike[str]]
) -> tuple[str, list[str]]:
    """A session's paths, made absolute here: in the caller's working directory, when the call is made."""
    return shell._absolute(cwd), [shell._absolute(directory) for directory in additional_directories]


@_raises_also
def initialize(shell: ShellBase, *, meta: Meta | None = None, timeout: float | None = None) -> CallSpec[Initialize]:
    """Introduce ourselves: protocol version 1, our client info and capabilities (``meta`` as ``_meta``).

    Raises:
        UnsupportedProtocolVersion: the agent speaks another version (it is torn down).
        RequestError: the agent answered with an error (AuthRequired for -32000).
    """
    return CallSpec(lambda: shell._core.initialize(meta), timeout)


@_raises_also
def authenticate(
    shell: ShellBase, method_id: str, *, meta: Meta | None = None, timeout: float | None = None
) -> CallSpec[None]:
    """Log in with one of the methods the agent offered at ``initialize`` (``meta`` may hold Secrets).

    Raises:
        NotAdvertised: the agent did not offer ``method_id``, or it is a ``terminal`` method (nothing written).
        RequestError: the agent refused (the client stays usable).
    """
    return CallSpec(lambda: shell._core.authenticate(method_id, meta), timeout)


@_raises_also
def logout(shell: ShellBase, *, meta: Meta | None = None, timeout: float | None = None) -> CallSpec[None]:
    """Log out (only if the agent advertised ``auth.logout``; ``meta`` as ``_meta``).

    Raises:
        NotAdvertised: the agent did not advertise logout (nothing written).
        RequestError: the agent answered with an error.
    """
    return CallSpec(lambda: shell._core.logout(meta), timeout)


@_raises_also
def new_session(
    shell: ShellBase,
    cwd: str | os.PathLike[str],
    mcp_servers: Sequence[AnyMcpServer] = (),
    *,
    meta: Meta | None = None,
    system_prompt: SystemPrompt | None = None,
    additional_directories: Sequence[str | os.PathLike[str]] = (),
    timeout: float | None = None,
) -> CallSpec[Session]:
    """Open a session whose working directory is ``cwd`` (made absolute).

    Raises:
        OutsideSandbox: with ``Options(sandbox=...)``, ``cwd`` or an additional directory lies outside the
            sandbox's writable roots (nothing written).
        NotAdvertised: a system prompt or additional directories the agent did not advertise (nothing written).
        AuthRequired: the agent wants ``authenticate`` first (the client stays usable).
        RequestError: the agent answered with an error.
    """
    path, extra = _paths(shell, cwd, additional_directories)
    return CallSpec(
        lambda: shell._core.new_session(
            path, mcp_servers, meta=meta, system_prompt=system_prompt, additional_directories=extra
        ),
        timeout,
    )


@_raises_also
def load_session(
    shell: ShellBase,
    session_id: str,
    cwd: str | os.PathLike[str],
    mcp_servers: Sequence[AnyMcpServer] = (),
    *,
    meta: Meta | None = None,
    system_prompt: SystemPrompt | None = None,
    additional_directories: Sequence[str | os.PathLike[str]] = (),
    timeout: float | None = None,
) -> CallSpec[LoadedSession]:
    """Load an earlier session: the agent replays its history as updates (each to ``on_update``, each
    counted against ``TransferLimits``), then answers.

    Raises:
        OutsideSandbox: with ``Options(sandbox=...)``, ``cwd`` or an additional directory lies outside the
            sandbox's writable roots (nothing written).
        NotAdvertised: the agent did not advertise ``loadSession`` (or the extras asked for); nothing written.
        SessionNotFound: the agent does not know the session (the client stays usable).
        AuthRequired: the agent wants `authenticate` first (the client stays usable).
        RequestError: the agent answered with an error.
        TransferLimitExceeded: a message broke a transfer limit.
    """
    path, extra = _paths(shell, cwd, additional_directories)
    return CallSpec(
        lambda: shell._core.load_session(
            session_id, path, mcp_servers, meta=meta, system_prompt=system_prompt, additional_directories=extra
        ),
        timeout,
    )


@_raises_also
def resume_session(
    shell: ShellBase,
    session_id: str,
    cwd: str | os.PathLike[str],
    mcp_servers: Sequence[AnyMcpServer] = (),
    *,
    meta: Meta | None = None,
    system_prompt: SystemPrompt | None = None,
    additional_directories: Sequence[str | os.PathLike[str]] = (),
    timeout: float | None = None,
) -> CallSpec[Session]:
    """Resume an earlier session without a replay of its history.

    Raises:
        OutsideSandbox: with ``Options(sandbox=...)``, ``cwd`` or an additional directory lies outside the
            sandbox's writable roots (nothing written).
        NotAdvertised: the agent did not advertise ``sessionCapabilities.resume`` (or the extras asked for);
            nothing written.
        SessionNotFound: the agent does not know the session (the client stays usable).
        AuthRequired: the agent wants `authenticate` first (the client stays usable).
        RequestError: the agent answered with an error.
    """
    path, extra = _paths(shell, cwd, additional_directories)
    return CallSpec(
        lambda: shell._core.resume_session(
            session_id, path, mcp_servers, meta=meta, system_prompt=system_prompt, additional_directories=extra
        ),
        timeout,
    )


@_raises_also
def fork_session(
    shell: ShellBase,
    session_id: str,
    cwd: str | os.PathLike[str],
    mcp_servers: Sequence[AnyMcpServer] = (),
    *,
    additional_directories: Sequence[str | os.PathLike[str]] | None = None,
    system_prompt: SystemPrompt | None = None,
    meta: Meta | None = None,
    timeout: float | None = None,
    force: bool = False,
) -> CallSpec[Session]:
    """Fork a session: a new session that starts from the context of ``session_id``, whose working directory
    is ``cwd`` (made absolute). The original session is left as it was. Some agents (OpenCode) replay the
    fork's history as updates under the new session id before they answer: each goes to ``on_update``.

    Raises:
        OutsideSandbox: with ``Options(sandbox=...)``, ``cwd`` or an additional directory lies outside the
            sandbox's writable roots (nothing written).
        NotAdvertised: the agent did not advertise ``sessionCapabilities.fork`` (``force=True`` sends it
            anyway, recorded as forced), or a system prompt or additional directories it did not advertise;
            nothing written.
        SessionNotFound: the agent does not know the session (the client stays usable).
        AuthRequired: the agent wants `authenticate` first (the client stays usable).
        RequestError: the agent answered with an error.
    """
    path, extra = _paths(shell, cwd, additional_directories or ())
    return CallSpec(
        lambda: shell._core.fork_session(
            session_id,
            path,
            mcp_servers,
            meta=meta,
            system_prompt=system_prompt,
            additional_directories=extra if additional_directories is not None else None,
            force=force,
        ),
        timeout,
    )


@_raises_also
def request(
    shell: ShellBase, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
) -> CallSpec[Any]:
    """Send a request the client has no call of its own for, and return its answer as decoded JSON: an
    extension method (its name begins with ``_``) or one of the unstable methods of ACP (``providers/list``,
    ``providers/set``, ``session/set_title``, ``session/status``, …).

    ``params`` is the JSON object sent (None: ``{}``); :class:`~tinyacp.Secret` values anywhere in it are sent
    plainly and redacted in the journal. The line is recorded before it is written; at the deadline the client
    sends ``$/cancel_request`` for it, as for any call.

    Raises:
        UsageError: ``method`` has a call of its own (use it), or is neither an extension method nor an unstable
            one (nothing written).
        TypeError: ``params`` is not a dict, or holds a value that is not JSON (nothing written).
        RequestError: the agent answered with an error (-32601 when it does not know the method).
    """
    return CallSpec(lambda: shell._core.request(method, params), timeout)


@_raises_also
def notify(shell: ShellBase, method: str, params: dict[str, Any] | None = None) -> CallSpec[None]:
    """Send a notification the client has no call of its own for: an extension method (its name begins with
    ``_``) or one of the unstable methods of ACP without a call of their own.

    ``params`` is the JSON object sent (None: ``{}``); :class:`~tinyacp.Secret` values anywhere in it are sent
    plainly and redacted in the journal. The line is recorded before it is written; the call returns once the
    agent took it, or after ``Options.cancel_grace`` with the line queued for the next call.

    Raises:
        UsageError: ``method`` has a call of its own (use it), or is neither an extension method nor an unstable
            one (nothing written).
        TypeError: ``params`` is not a dict, or holds a value that is not JSON (nothing written).
    """
    return CallSpec(lambda: Call(shell._core.notification(method, params)), None, notification=True)


@_raises_also
def close_session(
    shell: ShellBase, session_id: str, *, meta: Meta | None = None, timeout: float | None = None
) -> CallSpec[None]:
    """Ask the agent to close a session (free what it holds for it; ``meta`` as ``_meta``).

    Raises:
        NotAdvertised: the agent did not advertise ``sessionCapabilities.close`` (nothing written).
        SessionNotFound: the agent does not know the session (the client stays usable).
        RequestError: the agent answered with an error.
    """
    return CallSpec(lambda: shell._core.close_session(session_id, meta), timeout)


@_raises_also
def delete_session(
    shell: ShellBase, session_id: str, *, meta: Meta | None = None, timeout: float | None = None
) -> CallSpec[None]:
    """Ask the agent to delete a session from its list (``meta`` as ``_meta``).

    Raises:
        NotAdvertised: the agent did not advertise ``sessionCapabilities.delete`` (nothing written).
        SessionNotFound: the agent does not know the session (the client stays usable).
        RequestError: the agent answered with an error.
    """
    return CallSpec(lambda: shell._core.delete_session(session_id, meta), timeout)


@_raises_also
def list_sessions(
    shell: ShellBase,
    cwd: str | os.PathLike[str] | None = None,
    cursor: str | None = None,
    *,
    meta: Meta | None = None,
    timeout: float | None = None,
) -> CallSpec[SessionPage]:
    """One page of the agent's sessions, those in ``cwd`` only when given; pass ``next_cursor`` for more
    (``meta`` as ``_meta``).

    Raises:
        NotAdvertised: the agent did not advertise ``sessionCapabilities.list`` (nothing written).
        RequestError: the agent answered with an error.
    """
    path = None if cwd is None else shell._absolute(cwd)
    return CallSpec(lambda: shell._core.list_sessions(path, cursor, meta), timeout)


@_raises_also
def set_mode(
    shell: ShellBase,
    session_id: str,
    mode_id: str,
    *,
    meta: Meta | None = None,
    force: bool = False,
    timeout: float | None = None,
) -> CallSpec[None]:
    """Switch the session's mode; ``force=True`` sends a mode the session did not list (recorded as forced).

    Raises:
        NotAdvertised: ``mode_id`` is not among the session's available modes (nothing written).
        SessionNotFound: the agent does not know the session (the client stays usable).
        RequestError: the agent answered with an error.
    """
    return CallSpec(lambda: shell._core.set_mode(session_id, mode_id, meta=meta, force=force), timeout)


@_raises_also
def set_config_option(
    shell: ShellBase,
    session_id: str,
    config_id: str,
    value: str | bool,
    *,
    meta: Meta | None = None,
    force: bool = False,
    timeout: float | None = None,
) -> CallSpec[tuple[ConfigOption, ...]]:
    """Set a config option (a value id for a select option, a bool for a boolean one); returns all options.

    Raises:
        NotAdvertised: an unknown ``config_id``, an option of an unknown type, or a value the option does
            not offer (nothing written; ``force=True`` sends it anyway).
        TypeError: ``value`` is neither a str nor a bool.
        SessionNotFound: the agent does not know the session (the client stays usable).
        RequestError: the agent answered with an error.
    """
    return CallSpec(
        lambda: shell._core.set_config_option(session_id, config_id, value, meta=meta, force=force), timeout
    )


@_raises_also
def set_model(
    shell: ShellBase,
    session_id: str,
    model_id: str,
    *,
    meta: Meta | None = None,
    force: bool = False,
    timeout: float | None = None,
) -> CallSpec[None]:
    """Choose the session's model: through its ``model`` config option, else the legacy ``session/set_model``
    (only for a model the session listed in ``models``).

    Raises:
        NotAdvertised: the session offers no such model (nothing written; ``force=True`` sends it anyway).
        SessionNotFound: the agent does not know the session (the client stays usable).
        RequestError: the agent answered with an error.
    """
    return CallSpec(lambda: shell._core.set_model(session_id, model_id, meta=meta, force=force), timeout)


@_raises_also
def prompt(
    shell: ShellBase,
    session_id: str,
    content: str | Sequence[PromptContent],
    *,
    meta: Meta | None = None,
    timeout: float | None = None,
) -> CallSpec[PromptResult]:
    """Send a prompt and handle the turn until the agent's final response.

    At the deadline the client sends one ``session/cancel`` and waits up to ``Options.cancel_grace`` for
    the agent's answer; the result then has ``timed_out=True``. A reply that reaches a reply limit is cut
    there (``result.overflow``) and the turn cancelled the same way. ``result.usage`` holds what the turn
    used, when the agent said.

    With :class:`~tinyacp.AsyncClient`, if the awaiting task is cancelled, the client sends ``session/cancel``,
    tears the agent down (shielded) and re-raises :class:`asyncio.CancelledError`.

    Raises:
        UnsupportedContent: a block the agent did not advertise (nothing is written).
        TransferLimitExceeded: the prompt is too long (nothing is written), or an update broke a limit.
        AgentTimeout: no answer within ``cancel_grace`` after the cancel, or the agent did not read its input by
            the deadline, so that no cancel could reach it (the agent is torn down).
        AuthRequired: the agent wants `authenticate` first (the client stays usable).
        SessionNotFound: the agent does not know the session (the client stays usable).
        RequestError: the agent answered with an error.
        ReaderExhaustion: the agent sent a line longer than the reader's limit (it is torn down).
    """
    return CallSpec(lambda: shell._core.prompt(session_id, content, meta), timeout, prompt=True)


@_raises_like(prompt)
def prompt_stream(
    shell: ShellBase,
    session_id: str,
    content: str | Sequence[PromptContent],
    *,
    meta: Meta | None = None,
    timeout: float | None = None,
) -> CallSpec[PromptResult]:
    """Send a prompt and iterate over this turn's updates as they arrive; the :class:`PromptResult` is then
    ``stream.result``.

    The same turn as :meth:`prompt` (the same deadline, cancel and limits), with each update of the turn's
    session handed out after the observer recorded it. Nothing is sent until the first request for an update,
    and while the consumer does not ask for the next one the client does not read from the agent (the buffer is
    one update). The stream holds the client until the turn ends. Leaving early (closing the stream, or leaving
    its ``with`` block) sends ``session/cancel`` once and reads on, recording everything, until the agent ends
    the turn, for at most ``Options.cancel_grace``; past it the agent is torn down. What :meth:`prompt` raises,
    the request for an update raises.
    """
    return prompt(shell, session_id, content, meta=meta, timeout=timeout)
