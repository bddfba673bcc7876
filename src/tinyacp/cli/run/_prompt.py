"""One ``tinyacp prompt`` run: start the agent, open the session, one turn, the report; ``tinyacp chat`` extends it.

The pieces it wires live beside it: the observer (:mod:`tinyacp.cli.run._observer`), the person's terminal
(:mod:`tinyacp.cli.run._terminal`), the JSON events (:mod:`tinyacp.cli.run._events`), how the run ended
(:mod:`tinyacp.cli.run._outcome`) and the files sent with the prompt (:mod:`tinyacp.cli.run._attachments`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from ..._client import Client
from ..._errors import RequestError, TinyAcpError
from ..._files import open_output
from ..._journal import JsonlJournal
from ..._messages import Initialize, PromptContent
from ..._options import Options
from ..._records import PromptResult
from ..agents._explain import explain, stderr_lines
from ..agents._resolve import AgentSpec
from ..agents._session import apply_settings, open_session, raw_auth_methods
from ..shared._display import one_line
from ..shared._exit import Exit, SettingUnavailable
from ..shared._features import COMMAND_FEATURES
from ..shared._sandbox import describe as describe_sandbox
from ..shared._sandbox import describe_commands
from ..shared._trace import CommandTrace
from ._attachments import prompt_with_attachments
from ._display import Display
from ._events import JsonEvents, usage_result
from ._mcp import check_transports
from ._observer import RunObserver
from ._outcome import Outcome, outcome_of_result, usage_words
from ._questions import Questions
from ._settings import PromptSettings
from ._terminal import Asker, Interrupts, stopped_words

__all__ = ["Deadline", "PromptRun", "run_prompt"]


class PromptRun:
    """One run of ``tinyacp prompt``."""

    interrupts_class: type[Interrupts] = Interrupts
    span_name = "tinyacp prompt"

    def __init__(self, settings: PromptSettings, *, stdin_fd: int, stdout: BinaryIO, stderr: TextIO) -> None:
        self.settings = settings
        self.stdin_fd = stdin_fd
        self.stdout = stdout
        self.display = Display(stderr, None if settings.json else stdout, quiet=settings.quiet)
        self.journal: JsonlJournal | None = None
        self.events: JsonEvents | None = None
        self.epoch = 1
        self.agent_pid: int | None = None
        self.client: Client | None = None
        self.init: Initialize | None = None
        self.startup: float | None = None
        """``--startup-timeout`` while ``initialize`` waits under it (it came before ``--timeout``)."""
        self.trace: CommandTrace | None = None
        """The run's span, when spans are exported."""
        self.interrupts: Interrupts | None = None
        self.prompted = False
        """Whether a prompt was sent: a run refused before it keeps no journal of its own."""
        self.journal_kept = settings.journal
        """The journal the run leaves (None when there is none, or a refused run removed its own)."""

    def _open_journal(self, path: Path) -> bool:
        """Open the journal and begin its epoch; or say why it cannot be written (False)."""
        try:
            self.journal = JsonlJournal(path, sync=self.settings.sync_journal)
            plan = self.settings.sandbox_plan
            self.epoch = self.journal.begin_epoch(
                sandbox=plan.record() if plan is not None else None,
                trace_id=self.trace.trace_id if self.trace is not None else None,
            )
        except OSError as exc:
            if self.journal is not None:
                self.journal.close()
            message = f"cannot write the journal {path}: {exc.strerror or exc}"
            self.display.error(message, ["(choose another file with --journal PATH, or run with --no-journal)"])
            if self.settings.json:
                usage_result(self.stdout, message)  # the result event is always last, also here
            return False
        return True

    def run(self) -> int:
        """Run and return the exit status."""
        settings = self.settings
        if settings.trace is not None:
            self.trace = CommandTrace(settings.trace, self.span_name)
        try:
            code = self._run()
        except BaseException as exc:
            if self.trace is not None:
                self.trace.end(-1, type(exc).__name__)
            raise
        if self.trace is not None:
            self.trace.end(code, None if code == Exit.OK else self.error_type)
        return code

    def _run(self) -> int:
        settings = self.settings
        self.error_type: str | None = None
        if settings.journal is not None and not self._open_journal(settings.journal):
            return int(Exit.USAGE)
        if settings.json:
            self.events = JsonEvents(self.stdout, self.epoch, self.display)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        interrupts = self.interrupts = self.interrupts_class(self.display, wake_w)
        terminal = Asker(self.display, self.stdin_fd, wake_r, lambda: interrupts.interrupted)
        asker = terminal if settings.ask else None
        observer = RunObserver(
            journal=self.journal,
            display=self.display,
            events=self.events,
            policy=settings.policy,
            asker=asker,
            limits=settings.transfer_limits,
            interrupts=interrupts,
            no_ask_reason=settings.no_ask_reason,
            config_tools=(settings.agent.allow_tools, settings.agent.deny_tools),
            serve=settings.serve,
            questions=Questions(
                self.display,
                terminal if settings.questions else None,
                settings.no_ask_reason,
                self.display.child_name,
                open_urls=settings.open_urls,
            ),
        )
        self.display.start()
        self.display.info(f"starting {settings.agent.name}: {settings.agent.display_command()}")
        if settings.sandbox_plan is not None:
            self.display.info(describe_sandbox(settings.sandbox_plan))
        if settings.serve.terminal and settings.serve.sandbox is not None:
            self.display.info(describe_commands(settings.serve.sandbox))
        interrupts.install()
        journal_error: OSError | None = None
        try:
            outcome = self._converse(observer, interrupts)
        finally:
            interrupts.restore()
            self.display.stop()
            os.close(wake_r)
            os.close(wake_w)
            if self.journal is not None:
                try:
                    self.journal.close()
                except OSError as exc:  # the last records could not be written
                    journal_error = exc
        if journal_error is not None and outcome.code == Exit.OK:
            outcome = self._failed(journal_error, observer)
        self._drop_refused_journal(outcome, interrupts)
        forced = interrupts.code
        if forced is not None:  # the person (or the system) stopped the run, whatever the agent answered
            outcome.code = forced
        elif settings.fail_on_reject and outcome.code == Exit.OK and observer.rejected:
            outcome.code = int(Exit.REJECTED)
        self._report(outcome, observer)
        self.error_type = outcome.error_type
        return outcome.code

    def _drop_refused_journal(self, outcome: Outcome, interrupts: Interrupts) -> None:
        """Remove the run's own journal when the run was refused before its prompt: nothing to continue, a mode,
        model, option or auth method the agent does not offer (exit status 2), or stopped by you while starting.
        A failure on the agent's side keeps its journal: it is how the failure is read."""
        settings = self.settings
        refused = outcome.code == Exit.USAGE or interrupts.stopped_by is not None
        if self.prompted or not refused or not settings.journal_own or settings.journal is None:
            return
        try:
            settings.journal.unlink()
        except OSError:  # it stays, and is said as usual
            return
        self.journal_kept = None

    def _converse(self, observer: RunObserver, interrupts: Interrupts) -> Outcome:
        settings = self.settings
        deadline = Deadline(settings.timeout)
        try:
            with contextlib.ExitStack() as stack:
                client = self._open(stack, observer, interrupts, deadline)
                assert self.init is not None and observer.session_id is not None
                blocks, notes = prompt_with_attachments(
                    settings.text, settings.attachments, self.init.prompt_capabilities
                )
                self.display.lines(notes, "33")
                result = self._turn(client, observer, interrupts, blocks, deadline.left())
        except (TinyAcpError, OSError, SettingUnavailable) as exc:
            return self._failed(exc, observer)
        return outcome_of_result(result)

    def _open(
        self, stack: contextlib.ExitStack, observer: RunObserver, interrupts: Interrupts, deadline: Deadline
    ) -> Client:
        """Start the agent, ``initialize`` it (within ``--startup-timeout``) and open the session."""
        settings = self.settings
        client = self.client = stack.enter_context(self._start(stack, observer))
        observer.watch.arm(client.kill)  # a first line that is not JSON-RPC: how the program ends is told too
        self.agent_pid = client.pid
        interrupts.attach(client)
        self.startup, left = deadline.first(settings.startup_timeout)
        self.display.waiting(waits_on(settings.agent), left)
        try:
            init = self.init = client.initialize(timeout=left)
        finally:
            self.display.done_waiting()
        self.startup = None
        problem = check_transports(list(settings.plan.mcp_servers), init.agent_capabilities.mcp_capabilities)
        if problem is not None:
            raise SettingUnavailable(problem)
        opened = open_session(
            client,
            init,
            settings.agent,
            settings.plan,
            index=settings.index,
            raw_methods=raw_auth_methods(observer.initialize_answer),
            say=self.display.info,
            timeout=deadline.left,
        )
        session = opened.session
        self._ready(init, session.id, client.pid)
        if opened.how == "forked":
            assert settings.plan.fork is not None
            self.display.info(f"forked session {one_line(settings.plan.fork, 80)} into {one_line(session.id, 80)}")
        elif opened.how != "new":
            replayed = f" ({opened.replayed} updates replayed)" if opened.how == "loaded" else ""
            self.display.info(f"continuing session {one_line(session.id, 80)}: {opened.how}{replayed}")
        observer.session_id = interrupts.session_id = session.id
        apply_settings(client, session.id, settings.plan, self.display.info, deadline.left())
        self._remember(session.id)
        return client

    def _remember(self, session_id: str, title: str | None = None) -> None:
        """Note the session in the index of sessions this machine ran (for ``--continue``), with ``title`` (the
        prompt's text by default); a failure only warns."""
        settings = self.settings
        if settings.index is None:
            return
        title = settings.text if title is None else title
        try:
            settings.index.record(settings.agent_key, settings.cwd, session_id, settings.journal, title)
        except OSError as exc:
            self.display.lines([f"could not note the session for --continue: {exc}"], "33")

    def _turn(
        self,
        client: Client,
        observer: RunObserver,
        interrupts: Interrupts,
        blocks: str | list[PromptContent],
        timeout: float | None,
    ) -> PromptResult:
        """One prompt turn in the open session; Ctrl-C cancels it."""
        assert observer.session_id is not None
        self.display.activity("waiting for the agent")
        observer.in_turn = interrupts.in_turn = True
        self.prompted = True
        try:
            return client.prompt(observer.session_id, blocks, timeout=timeout)
        finally:
            observer.in_turn = interrupts.in_turn = False

    def _start(self, stack: contextlib.ExitStack, observer: RunObserver) -> Client:
        """Start the agent (its stderr kept as a tail for error messages, or appended to ``--agent-log``)."""
        settings = self.settings
        stderr: Any = "tail"
        if settings.agent_log is not None:
            fd = open_output(settings.agent_log)  # never a wait for a FIFO's reader
            stack.callback(os.close, fd)
            stderr = fd
        env = {**os.environ, **settings.agent.env} if settings.agent.env else None
        options = Options(
            command=settings.agent.command,
            cwd=settings.cwd,
            env=env,
            epoch=self.epoch,
            observer=observer if self.trace is None else self.trace.observer(observer),
            policy=settings.policy,
            reader_limits=settings.reader_limits,
            transfer_limits=settings.transfer_limits,
            stderr=stderr,
            kill_grace=settings.kill_grace,
            cancel_grace=settings.cancel_grace,
            # Links to open are asked for only where someone can open them and say when they are done.
            features=dataclasses.replace(COMMAND_FEATURES, elicitation_url=settings.questions),
            sandbox=settings.sandbox,
            serve=settings.serve,
        )
        return Client(options)

    def _failed(self, exc: BaseException, observer: RunObserver) -> Outcome:
        """The outcome of an error: what happened, the agent's words about it, the tail of its stderr; or, when a
        signal stopped the agent, that the person stopped the run (the error is what stopping it caused)."""
        client = self.client
        observer.watch.disarm()
        stopped_by = self.interrupts.stopped_by if self.interrupts is not None else None
        if stopped_by is not None:
            return Outcome(
                int(Exit.CANCELLED), None, stopped_words(stopped_by, self._phase(observer)), type(exc).__name__
            )
        tail = getattr(exc, "stderr_tail", None) or (client.stderr_tail() if client is not None else None)
        why = explain(
            exc,
            self.settings.agent,
            self.init,
            startup_timeout=self.startup,
            raw_methods=raw_auth_methods(observer.initialize_answer),
            cwd=self.settings.cwd,
            watch=observer.watch,
            stderr_tail=tail,
        )
        log = str(self.settings.agent_log) if self.settings.agent_log is not None else None
        hint = [*why.hint, *stderr_lines(tail, log if client is not None else None)]
        data = exc.data if isinstance(exc, RequestError) else None
        return Outcome(
            int(why.code), None, why.message, type(exc).__name__, "\n".join(hint) or None, data, tuple(why.hint)
        )

    def _phase(self, observer: RunObserver) -> str:
        """Where the run was when it stopped, in words."""
        if self.init is None:
            return "while the agent was starting (it had not answered initialize)"
        if observer.session_id is None:
            return "while the session was opening"
        return "during the turn"

    def _ready(self, init: Initialize, session_id: str, pid: int) -> None:
        info = init.agent_info
        name = f"{info.name} {info.version}" if info is not None else "the agent"
        self.display.info(
            f"{one_line(name, 80)} (ACP v{init.protocol_version}) · session {one_line(session_id, 80)} · "
            f"{self.settings.cwd}"
        )
        if self.events is not None:
            plan = self.settings.sandbox_plan
            sandbox = plan.record() if plan is not None else None
            self.events.session(init, session_id, self.settings.cwd, pid, self.settings.journal, sandbox=sandbox)

    def _report(self, outcome: Outcome, observer: RunObserver) -> None:
        display = self.display
        display.end_reply()
        display.final_plan()
        result = outcome.result
        elapsed = display.elapsed
        if outcome.error is not None:
            display.error(outcome.error, outcome.hint.splitlines() if outcome.hint else ())
        elif result is not None:
            failed = outcome.code != Exit.OK  # -q hides progress, not why the run failed
            display.lines([self._done_line(result, observer, elapsed)], "33" if failed else "32", always=failed)
        if observer.unasked:
            n = observer.unasked
            display.lines(
                [
                    f"{n} permission request{'s were' if n != 1 else ' was'} rejected: no rule allowed "
                    f"{'them' if n != 1 else 'it'} and {self.settings.no_ask_reason}. Allow with --allow-tool NAME, "
                    "--allow-kind KIND, --allow-title PREFIX or --yes."
                ],
                "33",
            )
        display.lines(observer.unmatched_tool_rules(), "33")
        if self.journal_kept is not None:
            display.info(f"journal: {self.journal_kept}")
        elif self.settings.journal is not None:
            display.info("no journal kept: the run was refused before its prompt")
        if self.events is not None:
            self.events.result(
                outcome,
                seq=observer.last_seq,
                session_id=observer.session_id,
                allowed=observer.allowed,
                rejected=observer.rejected,
                usage=observer.usage,
                elapsed=elapsed,
                journal=self.journal_kept,
            )

    def _done_line(self, result: PromptResult, observer: RunObserver, elapsed: float) -> str:
        """How the turn ended: stop reason, time, updates, permissions, notices, subagents, the reply's cut, tokens
        and cost."""
        permissions = observer.allowed + observer.rejected
        parts = [
            f"{result.stop_reason}" + (" (timed out)" if result.timed_out else ""),
            f"{elapsed:.1f}s",
            _count(result.update_count, "update"),
            _count(permissions, "permission")
            + (f" ({observer.allowed} allowed, {observer.rejected} rejected)" if permissions else ""),
        ]
        if result.notices or result.notices_dropped:  # a model fallback changes what the answer is worth
            parts.append(_count(len(result.notices), "notice") + _left_out(result.notices_dropped, "--max-notice*"))
        if result.subagents or result.subagents_dropped:
            left_out = _left_out(result.subagents_dropped, "--max-subagent*", "announcement")
            parts.append(_count(len(result.subagents), "subagent") + left_out)
        if result.overflow is not None:
            parts.append(f"reply cut at {result.overflow.kept_bytes} bytes ({result.overflow.kind})")
        parts += usage_words(result.usage, observer.usage)
        return f"done: {' · '.join(parts)}"


def _left_out(number: int, flags: str, noun: str = "") -> str:
    """`` (3 left out: --max-notice*)`` when a limit left some out; nothing when none was."""
    if not number:
        return ""
    counted = _count(number, noun) if noun else str(number)
    return f" ({counted} left out: {flags})"


def waits_on(agent: AgentSpec) -> str:
    """What a start waits on, in words: an ``npx``/``uvx`` agent's package may be downloading; any other program
    has not answered yet."""
    if agent.launcher in ("npx", "uvx") and agent.package:
        return f"{agent.launcher} may be fetching {one_line(agent.package, 120)}"
    return f"{one_line(os.path.basename(agent.command[0]) or agent.name, 60)} has not answered yet"


def _count(number: int, noun: str) -> str:
    """``1 update``, ``2 updates``."""
    return f"{number} {noun}{'s' if number != 1 else ''}"


class Deadline:
    """``--timeout`` covers the whole run: each call gets what is left."""

    def __init__(self, timeout: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._end = None if timeout is None else self._clock() + timeout

    def left(self) -> float | None:
        """The seconds left (never below zero); None without a deadline."""
        if self._end is None:
            return None
        return max(0.0, self._end - self._clock())

    def first(self, limit: float | None) -> tuple[float | None, float | None]:
        """The timeout of a call that also has a deadline of its own (``--startup-timeout``): (that deadline
        when it comes first, else None; the timeout to use)."""
        left = self.left()
        if limit is not None and (left is None or limit < left):
            return limit, limit
        return None, left


def run_prompt(settings: PromptSettings) -> int:
    """Run ``tinyacp prompt`` on this process's stdin, stdout and stderr; returns the exit status."""
    return PromptRun(settings, stdin_fd=sys.stdin.fileno(), stdout=sys.stdout.buffer, stderr=sys.stderr).run()
