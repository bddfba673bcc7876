"""The one exception tree of tinyacp.

Every exception the library raises on purpose derives from :class:`TinyAcpError`. The tree separates *the
caller misused the API* from *the agent misbehaved*, so that a bot can tell a bug in its own code from a flaky
agent::

    TinyAcpError
    ├── UsageError                    the caller asked for something the client cannot do
    │   ├── ClientBusy                a second call while one is in flight
    │   ├── ClientClosed              any call after close()
    │   ├── UnsupportedContent        a prompt block the agent did not advertise
    │   ├── NotAdvertised             a call, option or value the agent did not advertise; nothing written
    │   ├── MissingDurableObserver    a client was made without an observer
    │   ├── SandboxUnavailable        the sandbox asked for cannot be made here (no bwrap, no user namespaces)
    │   └── OutsideSandbox            a session asked in a directory the sandbox does not let the agent write
    ├── LimitExceeded                 a bound the caller set was reached
    │   ├── ReaderExhaustion          a line longer than the reader's limit; the reader stops for good
    │   └── TransferLimitExceeded     a message, an update or the update count passed TransferLimits
    ├── AgentError                    the agent failed, went away or broke the protocol
    │   ├── SpawnError                the agent's program could not be started
    │   ├── AgentExited               the agent exited or closed its output while a call waited
    │   ├── AgentTimeout              the call's deadline passed (also a TimeoutError)
    │   ├── RequestError              the agent answered our request with a JSON-RPC error
    │   │   ├── AuthRequired          error -32000: authenticate first (``auth_methods`` says how)
    │   │   └── SessionNotFound       error -32002: the agent does not know the session
    │   ├── UnsupportedProtocolVersion  the agent speaks a protocol version other than 1
    │   └── ProtocolViolation         the agent answered with something we cannot use
    ├── ObserverError                 the caller's observer raised; the original is the __cause__
    └── BatchError                    a batch (tinyacp.batch) cannot go on
        ├── BatchItemError            an item is malformed, or its id repeats
        ├── BatchBusy                 another batch is writing to the same output directory
        ├── BatchStorageError         a node of the cluster cannot see or write the output directory
        └── BatchEngineError          the engine failed as a whole (Ray missing or unreachable, no node left)

Invalid option values (a zero limit, a zero epoch, a timeout of nan or 1e300) raise the built-in
:class:`ValueError`, naming the argument and its range, as the standard library does for bad arguments.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing would add about 9 ms to a 1.6 ms `import tinyacp` (benchmarks/RESULTS.md, start-up)
    from typing import Any

__all__ = [
    "AgentError",
    "AgentExited",
    "AgentTimeout",
    "AuthRequired",
    "BatchBusy",
    "BatchEngineError",
    "BatchError",
    "BatchItemError",
    "BatchStorageError",
    "ClientBusy",
    "ClientClosed",
    "LimitExceeded",
    "MissingDurableObserver",
    "NotAdvertised",
    "ObserverError",
    "OutsideSandbox",
    "ProtocolViolation",
    "ReaderExhaustion",
    "RequestError",
    "SandboxUnavailable",
    "SessionNotFound",
    "SpawnError",
    "TinyAcpError",
    "TransferLimitExceeded",
    "UnsupportedContent",
    "UnsupportedProtocolVersion",
    "UsageError",
]


class TinyAcpError(Exception):
    """Base class of every exception tinyacp raises on purpose."""


class UsageError(TinyAcpError):
    """The caller asked for something the client cannot do in its current state."""


class ClientBusy(UsageError):
    """A call was made while another call on the same client was still in flight."""


class ClientClosed(UsageError):
    """The client was closed (or torn down after a failure); only ``close()`` is still allowed."""


class UnsupportedContent(UsageError):
    """A prompt block needs a capability the agent did not advertise; nothing was sent."""

    def __init__(self, block_type: str, capability: str) -> None:
        super().__init__(
            f"the agent did not advertise promptCapabilities.{capability}, so a {block_type!r} block "
            "cannot be sent; nothing was written"
        )
        self.block_type = block_type
        self.capability = capability


class NotAdvertised(UsageError):
    """The agent did not advertise the call, option or value asked for; nothing was written."""


class MissingDurableObserver(UsageError):
    """The client has no observer to record what the agent sends before acting on it (raised when it is made)."""


class SandboxUnavailable(UsageError):
    """The sandbox asked for cannot be made here (not Linux, no ``bwrap``, no user namespaces); nothing started."""


class OutsideSandbox(UsageError):
    """A session was asked in a directory outside the sandbox's writable roots; nothing was written."""


class LimitExceeded(TinyAcpError):
    """A bound the caller chose was reached."""


class ReaderExhaustion(LimitExceeded):
    """A line was longer than the reader's limit; the reader refuses every later call too."""

    def __init__(self, max_line: int, seen: int) -> None:
        super().__init__(
            f"a line passed the limit of {max_line} bytes ({seen} bytes seen without a newline); "
            "reading stopped for good"
        )
        self.max_line = max_line
        self.seen = seen


class TransferLimitExceeded(LimitExceeded):
    """A message, an update or the number of updates passed a :class:`TransferLimits` bound."""

    def __init__(self, limit: str, value: int, size: int, seq: int | None = None) -> None:
        where = f" (update seq {seq})" if seq is not None else ""
        super().__init__(f"{limit}={value} exceeded: {size}{where}")
        self.limit = limit
        self.value = value
        self.size = size
        self.seq = seq


class AgentError(TinyAcpError):
    """The agent failed, went away or broke the protocol."""


class SpawnError(AgentError):
    """The agent's program could not be started; the OSError is the ``__cause__``."""


class AgentExited(AgentError):
    """The agent exited, was killed, or closed its output while a call was waiting for it."""

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None = None,
        stderr_tail: bytes | None = None,
    ) -> None:
        if returncode is not None:
            message += f" ({describe_returncode(returncode)})"
        detail = message
        if stderr_tail:
            detail += "\n--- agent stderr (tail) ---\n" + stderr_tail.decode("utf-8", "replace")
        super().__init__(detail)
        self.message = message
        """What happened and how the agent ended, without the tail of its stderr (``str()`` adds it)."""
        self.returncode = returncode
        self.stderr_tail = stderr_tail

    @property
    def signal(self) -> int | None:
        """The signal that ended the agent, if a signal did."""
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None


class AgentTimeout(AgentError, TimeoutError):
    """The call's deadline passed before the agent answered."""


class RequestError(AgentError):
    """The agent answered one of our requests with a JSON-RPC error object."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{method} failed: {message} (code {code})")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


class AuthRequired(RequestError):
    """The agent answered -32000 (authentication required): call ``authenticate`` with one of ``auth_methods``."""

    def __init__(
        self, method: str, code: int, message: str, data: Any = None, auth_methods: tuple[Any, ...] = ()
    ) -> None:
        super().__init__(method, code, message, data)
        self.auth_methods = auth_methods
        """The :class:`~tinyacp.AuthMethod` values the agent offered at ``initialize``."""


class SessionNotFound(RequestError):
    """The agent answered -32002 (resource not found): it does not know the session asked for."""


class UnsupportedProtocolVersion(AgentError):
    """The agent answered ``initialize`` with a protocol version other than 1; it was torn down."""

    def __init__(self, version: object) -> None:
        super().__init__(f"the agent speaks ACP protocol version {version!r}; tinyacp speaks version 1")
        self.version = version


class ProtocolViolation(AgentError):
    """The agent answered our request with a message we cannot use (wrong shape, result and error both)."""


class ObserverError(TinyAcpError):
    """The caller's observer raised; the client did not act on the message and tore the agent down."""


class BatchError(TinyAcpError):
    """A batch of turns cannot go on; the records written so far stay, and a new run resumes."""


class BatchItemError(BatchError):
    """An item of a batch is malformed or repeats an id; ``line`` is its line in the input file, if any."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line


class BatchBusy(BatchError):
    """Another batch process holds the output directory's results file; two writers would mix their records."""


class BatchStorageError(BatchError):
    """A node of the cluster cannot see or write the batch's output directory (it must be shared storage)."""


class BatchEngineError(BatchError):
    """The engine failed as a whole: Ray is not installed or not reachable, or no node is left to run turns."""


def describe_returncode(returncode: int) -> str:
    """Say how a process ended, in words a log reader understands."""
    if returncode < 0:
        import signal

        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exit code {returncode}"
