"""Opening the files tinyacp reads or appends to: a regular file only, and never a wait on a FIFO or a device.

``open()`` of a FIFO blocks until someone opens its other end, and reading a character device (a terminal,
``/dev/zero``) may never end; a directory fails late and with a confusing message. So every file a user or a
neighbour can put a name to (journals, results, the session index, the config and MCP config files, the items
of a batch, the input of ``show`` and ``replay``) is opened with ``O_NONBLOCK`` (which makes the open of a FIFO
return at once), checked with ``fstat`` and refused unless it is a regular file, and only then made blocking.
"""

from __future__ import annotations

import errno
import io
import os
import stat

__all__ = ["open_output", "open_regular", "open_regular_binary", "read_regular"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def not_regular(path: str | os.PathLike[str], mode: int) -> OSError:
    """The error for a file that is not a regular file; its ``strerror`` says what it is."""
    kind = _kind(mode)
    what = kind if kind == "not a regular file" else f"{kind}, not a regular file"
    return OSError(errno.EINVAL, what, os.fspath(path))


def open_regular(
    path: str | os.PathLike[str], flags: int = os.O_RDONLY, mode: int = 0o600, *, dir_fd: int | None = None
) -> int:
    """Open ``path`` with ``flags`` and return a blocking descriptor of a regular file.

    Raises:
        OSError: the file cannot be opened, or is not a regular file (``EINVAL``, the message names what it
            is); a FIFO is refused without waiting for a writer or a reader.
    """
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        # A FIFO opened for writing without a reader (ENXIO), a directory opened for writing (EISDIR).
        if exc.errno in (errno.ENXIO, errno.EISDIR):
            try:
                status = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                raise exc from None
            raise not_regular(path, status.st_mode) from None
        raise
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise not_regular(path, status.st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular_binary(path: str | os.PathLike[str]) -> io.BufferedReader:
    """:func:`open_regular` for reading, as a buffered binary file.

    Raises:
        OSError: as :func:`open_regular`.
    """
    return os.fdopen(open_regular(path), "rb")


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The whole content of a regular file (at most ``limit + 1`` bytes when ``limit`` is given, so a caller
    can tell a file that is too long).

    Raises:
        OSError: as :func:`open_regular`, or a read failed.
    """
    with open_regular_binary(path) as file:
        return file.read() if limit is None else file.read(limit + 1)


def open_output(path: str | os.PathLike[str]) -> int:
    """Open ``path`` to append a stream to (``--agent-log``): a regular file (created 0600), or a device or a FIFO
    that someone reads (``/dev/null``, ``/dev/stderr``, a pipe to a pager); never a wait for a reader.

    Raises:
        OSError: it cannot be opened: a directory, or a FIFO that no process reads (``ENXIO``).
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "a FIFO (named pipe) that no process reads", os.fspath(path)) from None
        if exc.errno == errno.EISDIR:
            raise OSError(errno.EISDIR, "a directory, not a file", os.fspath(path)) from None
        raise
    os.set_blocking(fd, True)
    return fd
