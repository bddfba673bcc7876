"""The session store: a session, and the directory that keeps each one as ``<id>.json`` so that it outlives the
agent's process (another agent process can load, resume, list, close or delete it). Imports nothing of tinyacp.

``try``/``except ...: pass`` in place of ``contextlib.suppress``: contextlib would cost each start of the agent about
0.5 ms, as much as the package's split into modules costs (benchmarks/RESULTS.md)."""

from __future__ import annotations

import json
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._wire import JsonObject

STATE_DIR_ENV = "TINYACP_DEMO_STATE_DIR"


class Session:
    """A session; its state file keeps every attribute but the system prompt (see `record`)."""

    def __init__(
        self,
        session_id: str,
        cwd: str,
        *,
        title: str | None = None,
        updated_at: str = "",
        mode: str = "default",
        model: str = "demo-small",
        used: int = 0,
        cost: float = 0.0,
        history: list[JsonObject] | None = None,
        system_prompt: str | None = None,
        system_prompt_mode: str = "append",
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.title = title
        self.updated_at = updated_at
        self.mode = mode
        self.model = model
        self.used = used
        self.cost = cost
        self.history = [] if history is None else history
        self.system_prompt = system_prompt
        self.system_prompt_mode = system_prompt_mode

    def record(self) -> JsonObject:
        """What the state file keeps, in this order; `Session(**record)` makes the session again."""
        return {
            "session_id": self.session_id,
            "cwd": self.cwd,
            "title": self.title,
            "updated_at": self.updated_at,
            "mode": self.mode,
            "model": self.model,
            "used": self.used,
            "cost": self.cost,
            "history": self.history,
        }


def default_state_dir() -> str:
    """Where sessions are kept without ``--state-dir``: ``$TINYACP_DEMO_STATE_DIR``, else the XDG state home."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return configured
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "tinyacp-demo")


class Store:
    """Sessions as ``<id>.json`` files in one directory (created 0700 on the first save).

    A session's first record is written into the file that claimed its number, and the ``next-number`` hint is
    overwritten in place: only a session's later saves replace its file. Each file made and replaced costs the
    filesystem an inode, and on ext4 without a journal every file made later in the directory's group skips, one
    by one, the inodes freed in the last minutes: a batch runs many agents, and the client makes a journal file
    per turn.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._claimed: set[str] = set()
        """Paths this store claimed and has not written yet: their first save writes into them."""

    def _path(self, session_id: str) -> str | None:
        if session_number(session_id) is None:
            return None
        return os.path.join(self.directory, session_id + ".json")

    def save(self, session: Session) -> None:
        path = self._path(session.session_id)
        assert path is not None, "the demo names its own sessions"
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        text = json.dumps(session.record())
        if path not in self._claimed:
            replace(path, text)
            return
        self._claimed.discard(path)
        # Claimed by us and empty: a reader meanwhile finds no session, as it would find an empty file.
        with open(path, "r+", encoding="utf-8") as file:
            file.write(text)

    def load(self, session_id: str) -> Session | None:
        path = self._path(session_id)
        if path is None:
            return None
        try:
            with open(path, encoding="utf-8") as file:
                record = json.load(file)
            return Session(**record)
        except (OSError, ValueError, TypeError):
            return None

    def delete(self, session_id: str) -> None:
        path = self._path(session_id)
        if path is not None:
            try:  # noqa: SIM105  (no contextlib: see the module's docstring)
                os.unlink(path)
            except FileNotFoundError:
                pass

    def all(self) -> list[Session]:
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        found = (self.load(name[:-5]) for name in names if name.endswith(".json"))
        return [session for session in found if session is not None]

    def claim(self, at_least: int) -> int:
        """A session number N >= ``at_least`` that no other session in the directory has, held by creating
        ``demo-N.json`` exclusively: agents that share the directory (a batch runs many at once) never get the same
        one. The search starts from the number the directory's ``next-number`` file suggests, so a new session
        costs a few system calls however many are stored; the file names are read only when that file is missing
        or damaged. A directory that cannot be written to gives ``at_least``: the session just won't be saved."""
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            number = max(at_least, self._suggested())
            while True:
                try:
                    os.close(os.open(self._path_of(number), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                    break
                except FileExistsError:
                    number += 1
        except OSError:
            return at_least
        self._claimed.add(self._path_of(number))
        try:  # noqa: SIM105
            self._suggest(number + 1)
        except OSError:  # a stale suggestion (an older one, another agent's) costs a few tries
            pass
        return number

    def _suggest(self, number: int) -> None:
        """Overwrite the hint in place, at a fixed width: a reader that meets a write halfway gets a wrong number
        or none, which costs a few more tries or one listing, never a shared one (the claim decides)."""
        fd = os.open(self._hint, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.pwrite(fd, b"%-15d\n" % number, 0)
        finally:
            os.close(fd)

    @property
    def _hint(self) -> str:
        return os.path.join(self.directory, "next-number")

    def _suggested(self) -> int:
        try:
            with open(self._hint, "rb") as file:
                return int(file.read(16))
        except (OSError, ValueError):
            return self.next_number()

    def _path_of(self, number: int) -> str:
        return os.path.join(self.directory, f"demo-{number}.json")

    def next_number(self) -> int:
        """One more than the highest N of the stored sessions, read from the file names (``demo-N.json``): reading
        every file would make each new session cost more than the one before."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return 1
        numbers = [session_number(name[:-5]) for name in names if name.endswith(".json")]
        return max((number for number in numbers if number is not None), default=0) + 1


def replace(path: str, text: str) -> None:
    """Write ``path`` whole or not at all: a reader (another agent) never sees it half written."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, path)


def session_number(session_id: str) -> int | None:
    """N of a session id the demo makes, ``demo-N`` with 1 to 9 digits (0-9); None for any other id."""
    digits = session_id.removeprefix("demo-")
    if digits != session_id and 0 < len(digits) <= 9 and digits.isascii() and digits.isdigit():
        return int(digits)
    return None


def now() -> str:
    """The time, as a session's ``updatedAt`` says it: UTC, to the microsecond."""
    seconds = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1e6):06d}Z"
