"""``tinyacp chat``: a conversation on a terminal, many turns in one session.

Each line you type is a prompt turn, shown live as ``tinyacp prompt`` shows one, with the same permission
questions. Lines starting with ``/`` are commands (``/help``). Ctrl-C during a turn cancels the turn
(``session/cancel``) and the chat goes on; a second Ctrl-C stops the agent, which ends the chat. Ctrl-C at the
input line clears the line. Ctrl-D (end of input) ends the chat. The line editor is readline's, with a history
kept in the state directory.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable
from types import FrameType

from ..._client import Client
from ..._errors import AgentTimeout, ProtocolViolation, RequestError, TinyAcpError
from ..agents._session import fork_session, offered_lines, set_one
from ..shared._dirs import private_dir, state_dir
from ..shared._display import one_line
from ..shared._exit import Exit, SettingUnavailable, UsageProblem
from ..shared._text import text_argument
from ._observer import RunObserver
from ._outcome import Outcome, outcome_of_result
from ._prompt import Deadline, PromptRun
from ._settings import PromptSettings
from ._terminal import Interrupts

__all__ = ["ChatRun", "run_chat"]

PROMPT = "you> "
_HISTORY_LENGTH = 1000


class _Stop(Exception):
    """SIGTERM or SIGHUP while the chat waits for input: end the chat."""


class ChatInterrupts(Interrupts):
    """As for a prompt run during a turn; at the input line, Ctrl-C is Python's (it clears the line) and SIGTERM
    or SIGHUP end the chat."""

    reading = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.reading:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.terminated_by = signum
            raise _Stop
        super()._handle(signum, frame)

    def next_turn(self) -> None:
        """A cancelled turn is over: the next Ctrl-C cancels the next turn."""
        self.presses = 0
        self.cancelled = False


class ChatRun(PromptRun):
    """One ``tinyacp chat``."""

    interrupts_class = ChatInterrupts
    span_name = "tinyacp chat"

    def __init__(self, settings: PromptSettings, *, read: Callable[[str], str] = input) -> None:
        super().__init__(settings, stdin_fd=sys.stdin.fileno(), stdout=sys.stdout.buffer, stderr=sys.stderr)
        self._read = read
        self._turns = 0
        self._titled: set[str] = set()
        """The sessions the index has a title for: the first line typed in each (`tinyacp sessions` shows it)."""

    def _converse(self, observer: RunObserver, interrupts: Interrupts) -> Outcome:
        assert isinstance(interrupts, ChatInterrupts)
        try:
            with contextlib.ExitStack() as stack:
                client = self._open(stack, observer, interrupts, Deadline(self.settings.startup_timeout))
                self.display.stop()
                self.display.info("type a prompt; /help for commands; Ctrl-C cancels a turn, Ctrl-D ends the chat")
                with _History():
                    self._loop(client, observer, interrupts)
        except (TinyAcpError, OSError, SettingUnavailable) as exc:
            return self._failed(exc, observer)
        except _Stop:
            return Outcome(int(Exit.CANCELLED))
        return Outcome(int(Exit.OK))

    def _loop(self, client: Client, observer: RunObserver, interrupts: ChatInterrupts) -> None:
        while True:
            line = self._line(interrupts)
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            try:
                text_argument("that line", text, "nothing was sent; the chat goes on")
            except UsageProblem as exc:
                self.display.lines([str(exc)], "33")
                continue
            if text.startswith("/"):
                if self._command(client, observer, interrupts, text) is False:
                    break
                continue
            self._one_turn(client, observer, interrupts, text)
        self._close(client, observer)

    def _close(self, client: Client, observer: RunObserver) -> None:
        """End of the chat: close the session when the agent offers ``session/close``."""
        assert self.init is not None and observer.session_id is not None
        if "close" not in self.init.agent_capabilities.session_capabilities:
            return
        session = one_line(observer.session_id, 80)
        try:
            client.close_session(observer.session_id, timeout=self.settings.cancel_grace)
        except AgentTimeout:
            # The chat ended as the person asked; a slow answer to the courtesy close is not its failure. The
            # agent's process group is stopped next as at every end, which frees what the session held.
            grace = self.settings.cancel_grace
            self.display.info(f"session {session}: no answer to session/close in {grace:g} s; the agent is stopped")
            return
        self.display.info(f"session {session} closed")

    def _line(self, interrupts: ChatInterrupts) -> str | None:
        """The next line typed; None at Ctrl-D. Ctrl-C clears the line and asks again."""
        while True:
            interrupts.reading = True
            try:
                return self._read(PROMPT)
            except UnicodeDecodeError as exc:  # a terminal whose input is decoded strictly
                self.display.lines([f"that line is not UTF-8 text ({exc.reason}); nothing was sent"], "33")
            except KeyboardInterrupt:
                sys.stdout.write("\n")
            except EOFError:
                sys.stdout.write("\n")
                return None
            finally:
                interrupts.reading = False

    def _one_turn(self, client: Client, observer: RunObserver, interrupts: ChatInterrupts, text: str) -> None:
        self._turns += 1
        if observer.session_id is not None and observer.session_id not in self._titled:
            self._titled.add(observer.session_id)
            self._remember(observer.session_id, text)
        observer.new_turn()
        interrupts.next_turn()
        self.display.start()
        try:
            timeout = self.settings.timeout
            result = self._turn(client, observer, interrupts, text, timeout)
        finally:
            self.display.stop()
            self.display.end_reply()
            interrupts.next_turn()
        outcome = outcome_of_result(result)
        failed = outcome.code != Exit.OK  # -q hides progress, not how a turn failed
        done = self._done_line(result, observer, self.display.elapsed)
        self.display.lines([done], "33" if failed else "32", always=failed)

    def _command(self, client: Client, observer: RunObserver, interrupts: ChatInterrupts, text: str) -> bool:
        """Run a ``/`` command; False ends the chat."""
        name, *words = text.split()
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            self.display.lines(HELP)
        elif name == "/sessions":
            self._sessions()
        elif name in ("/mode", "/model", "/set"):
            self._setting(client, observer, name, words)
        elif name == "/fork":
            self._fork(client, observer, interrupts)
        else:
            self.display.lines([f"unknown command {one_line(name, 40)}; /help lists the commands"], "33")
        return True

    def _fork(self, client: Client, observer: RunObserver, interrupts: ChatInterrupts) -> None:
        """``/fork``: fork the session (``session/fork``); the chat goes on in the fork, the session it came from
        is left as it was. An agent that cannot fork is said so, and the chat goes on where it was."""
        source = observer.session_id
        assert source is not None
        settings = self.settings
        try:
            session = fork_session(client, source, settings.cwd, settings.plan.mcp_servers, settings.timeout)
        except SettingUnavailable as exc:
            self.display.lines([str(exc)], "33")
            return
        except RequestError as exc:
            self.display.lines([f"the agent refused to fork: {one_line(exc.message, 300)}"], "33")
            return
        observer.session_id = interrupts.session_id = session.id
        self._remember(session.id)
        self.display.info(
            f"forked session {one_line(source, 80)} into {one_line(session.id, 80)}: the chat goes on in the fork "
            f"({one_line(source, 80)} is left as it was)"
        )

    def _setting(self, client: Client, observer: RunObserver, name: str, words: list[str]) -> None:
        """``/mode ID``, ``/model ID``, ``/set KEY VALUE``: what the agent does not offer is said, the chat goes on."""
        assert observer.session_id is not None
        if name in ("/mode", "/model") and not words:
            self.display.lines(offered_lines(client.session_state(observer.session_id), name[1:]))
            return
        wanted = 2 if name == "/set" else 1
        if len(words) != wanted:
            usage = "/set KEY VALUE" if name == "/set" else f"{name} ID"
            self.display.lines([f"usage: {usage}"], "33")
            return
        what, value = (words[0], words[1]) if name == "/set" else (name[1:], words[0])
        try:
            set_one(
                client,
                observer.session_id,
                what,
                value,
                say=self.display.info,
                timeout=self.settings.timeout,
                option=name == "/set",
            )
        except SettingUnavailable as exc:
            self.display.lines([str(exc)], "33")
        except RequestError as exc:
            self.display.lines([f"the agent refused: {one_line(exc.message, 300)}"], "33")
        except ProtocolViolation as exc:  # the client stays usable: say so, and the chat goes on
            self.display.lines([f"the agent's answer to {name} was malformed: {one_line(str(exc), 300)}"], "33")

    def _report(self, outcome: Outcome, observer: RunObserver) -> None:
        """Each turn had its ``done`` line: at the end, only an error and where the journal is."""
        if outcome.error is not None:
            self.display.error(outcome.error, outcome.hint.splitlines() if outcome.hint else ())
        self.display.lines(observer.unmatched_tool_rules(), "33")
        if self.journal_kept is not None:
            self.display.info(f"journal: {self.journal_kept}")
        elif self.settings.journal is not None:
            self.display.info("no journal kept: the chat was refused before its first prompt")

    def _sessions(self) -> None:
        index = self.settings.index
        try:
            entries = index.entries(self.settings.agent_key, self.settings.cwd)[:10] if index is not None else []
        except OSError as exc:  # the index is not a regular file: say so, the chat goes on
            self.display.lines([f"cannot read the index of sessions: {exc.filename}: {exc.strerror}"], "33")
            return
        if not entries:
            self.display.lines(["no session of this agent in this directory yet"])
            return
        lines = [f"sessions of {self.settings.agent.name} in {self.settings.cwd}, most recent first:"]
        lines += [f"  {one_line(entry.session_id, 60)}  {one_line(entry.title, 60)}" for entry in entries]
        self.display.lines(lines)


HELP = [
    "commands:",
    "  /mode [ID]         switch the session's mode (without an ID: list the modes)",
    "  /model [ID]        switch the session's model (without an ID: list the models)",
    "  /set KEY VALUE     set a config option",
    "  /fork              fork the session (session/fork) and go on in the fork",
    "  /sessions          the sessions of this agent in this directory",
    "  /help              this list",
    "  /quit              end the chat (as Ctrl-D does)",
]


class _History:
    """readline's line editing, with the history kept in the state directory across chats."""

    def __enter__(self) -> _History:
        self.path = state_dir() / "chat_history"
        try:
            import readline
        except ImportError:  # a Python built without readline: plain input() still works
            self.readline = None
            return self
        self.readline = readline
        readline.set_history_length(_HISTORY_LENGTH)
        with contextlib.suppress(OSError):
            readline.read_history_file(self.path)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.readline is not None:
            with contextlib.suppress(OSError):
                private_dir(self.path.parent)
                self.readline.write_history_file(self.path)


def run_chat(settings: PromptSettings) -> int:
    """Run ``tinyacp chat`` on this process's terminal; returns the exit status."""
    return ChatRun(settings).run()
