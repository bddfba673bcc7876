"""Open files, the resource that runs out first when one process drives many agents.

Each running client holds :data:`FDS_PER_CLIENT` file descriptors (the agent's stdin and stdout, a wake-up pipe,
a pidfd; three more with ``stderr="tail"``), and the soft limit ``RLIMIT_NOFILE`` is often 1024, so a process
runs out at about two hundred clients while the hard limit is usually far higher. When starting an agent fails
for want of a descriptor (``EMFILE``), tinyacp raises the soft limit to the hard limit once and tries again,
the way Go's runtime raises it at start. Only when that is not possible does the start fail, with a
:class:`~tinyacp.SpawnError` that says what to do. Nothing is changed while the limit is never reached.

The raised limit is the process's: files the application opens afterwards may use it too, and the agents
started afterwards inherit it.
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from typing import Final, ParamSpec, TypeVar

from ._errors import SpawnError

__all__ = ["FDS_PER_CLIENT", "raise_soft_limit", "retry_when_out_of_fds"]

FDS_PER_CLIENT: Final = 5
"""Descriptors a client holds while its agent runs, with the default ``stderr="discard"``."""

# Where the hard limit is unlimited (macOS), the soft limit may still not exceed what the kernel allows a process;
# try from generous to the historical OPEN_MAX.
_UNLIMITED_TARGETS: Final = (1 << 20, 1 << 16, 10240)

P = ParamSpec("P")
R = TypeVar("R")


def raise_soft_limit() -> bool:
    """Raise the soft ``RLIMIT_NOFILE`` towards the hard limit.

    Returns:
        Whether the soft limit went up.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        targets = [target for target in _UNLIMITED_TARGETS if soft == resource.RLIM_INFINITY or target > soft]
    else:
        targets = [hard] if soft == resource.RLIM_INFINITY or hard > soft else []
    for target in targets:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        return True
    return False


def retry_when_out_of_fds(spawn: Callable[P, R]) -> Callable[P, R]:
    """Wrap an agent's start: on ``EMFILE``, raise the soft limit and try once more, else explain.

    The wrapped call must undo everything it did when it fails (``AgentProcess.spawn`` closes every fd it
    opened and reaps what it started), so that trying again starts from a clean state.
    """

    @functools.wraps(spawn)
    def start(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return spawn(*args, **kwargs)
        except (OSError, SpawnError) as exc:
            if not _out_of_fds(exc):
                raise
            failure: BaseException = exc
        if raise_soft_limit():
            try:
                return spawn(*args, **kwargs)
            except (OSError, SpawnError) as exc:
                if not _out_of_fds(exc):
                    raise
                failure = exc
        raise SpawnError(_explain(_program(args, kwargs), failure)) from failure

    return start


def _out_of_fds(exc: BaseException) -> bool:
    if isinstance(exc, SpawnError):
        exc = exc.__cause__ if exc.__cause__ is not None else exc
    return isinstance(exc, OSError) and exc.errno == errno.EMFILE


def _program(args: tuple[object, ...], kwargs: dict[str, object]) -> str:
    """The agent's program, from the wrapped call's ``argv`` (by keyword, or the first list of arguments)."""
    argv = kwargs.get("argv", next((arg for arg in args if isinstance(arg, list | tuple)), None))
    return str(argv[0]) if isinstance(argv, list | tuple) and argv else "?"


def _explain(program: str, failure: BaseException) -> str:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def show(limit: int) -> str:
        return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)

    reason = failure.__cause__ if isinstance(failure, SpawnError) and failure.__cause__ else failure
    return (
        f"cannot start the agent {program!r}: too many open files ({reason}). This process may have "
        f"{show(soft)} open at once (RLIMIT_NOFILE; its hard limit is {show(hard)}, which only a privileged "
        f"process can raise), and each running client holds {FDS_PER_CLIENT}. Close the clients you are done "
        "with, run fewer at once, or start the process with a higher hard limit (/etc/security/limits.conf, "
        "`LimitNOFILE=` for a systemd service, `docker run --ulimit nofile=N:N`)."
    )
