"""The files the client serves: confinement, reads and atomic writes (the I/O of ``fs/*``).

A path is confined in two steps. :func:`confine` (before anyone decides) refuses what is not absolute, has a
``..`` component, or resolves (``os.path.realpath``, every symlink followed) outside the roots; for a write the
last component is not followed: the file written is the one named. Then the act opens the resolved directory
again one component at a time from ``/`` with ``O_NOFOLLOW``, so a symlink swapped in meanwhile at any component
is refused rather than followed, and opens the file relative to that directory: a read with ``O_NOFOLLOW`` and
``O_NONBLOCK`` (a FIFO or a device is refused without waiting, see :mod:`tinyacp._files`), a write as a new file
beside the old one, renamed over it (atomic: a reader sees the old file or the new one, never a part), with the
old file's permission bits.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from typing import Final

from ._files import not_regular, open_regular
from ._messages import INVALID_PARAMS, RESOURCE_NOT_FOUND
from ._serve import FAILED, REFUSED, Failure, FileState

__all__ = ["confine", "prior_state", "read_text", "write_text"]

_CHUNK: Final = 64 * 1024
_NEW_FILE_MODE: Final = 0o644
"""A file a write creates: rw-r--r--, as most editors' new files under the usual umask 022."""


def _refused(message: str) -> Failure:
    return Failure(REFUSED, f"refused by the client's rules: {message}", confinement=True)


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def confine(path: str, roots: Sequence[str], *, write: bool) -> str | Failure:
    """The real path of ``path`` if it lies under ``roots``, else the refusal (nothing is opened).

    For a write the last component is kept as named (a symlink there is refused when the file is opened).
    """
    if not path or "\0" in path:
        return Failure(INVALID_PARAMS, "Invalid params: the path is empty or holds a NUL")
    if not os.path.isabs(path):
        return Failure(INVALID_PARAMS, f"Invalid params: {path!r} is not an absolute path (ACP wants one)")
    if ".." in path.split("/"):
        return _refused(f"{path!r} has a '..' component")
    real_roots = [os.path.realpath(root) for root in roots]
    head, name = os.path.split(os.path.normpath(path))
    if not name:
        return _refused(f"{path!r} names no file")
    real = os.path.join(os.path.realpath(head), name) if write else os.path.realpath(path)
    if not _under(real, real_roots):
        shown = f" (it resolves to {real!r})" if real != os.path.normpath(path) else ""
        return _refused(f"{path!r} is outside the session's folders{shown}")
    return real


def confine_dir(path: str, roots: Sequence[str]) -> str | Failure:
    """The real path of a working directory under ``roots``, else the refusal."""
    real = confine(path, roots, write=False)
    if isinstance(real, Failure):
        return real
    try:
        fd = _open_dir(real)
    except OSError as exc:
        return _refused(f"{path!r} is not a directory reached without a symlink ({exc.strerror})")
    os.close(fd)
    return real


def _open_dir(real: str) -> int:
    """A descriptor of directory ``real``, opened one component at a time from ``/``, never through a symlink.

    Raises:
        OSError: a component is missing, a symlink (``ELOOP``) or not a directory (``ENOTDIR``).
    """
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in real.split("/"):
            if not part:
                continue
            next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def _directory(real: str) -> Iterator[int]:
    fd = _open_dir(os.path.dirname(real))
    try:
        yield fd
    finally:
        os.close(fd)


def _failure(path: str, exc: OSError) -> Failure:
    if exc.errno == errno.ENOENT:
        return Failure(RESOURCE_NOT_FOUND, f"Resource not found: {path!r} does not exist")
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return _refused(f"{path!r} is reached through a symlink (or a component is not a directory)")
    if exc.errno == errno.EINVAL and exc.strerror and "regular file" in exc.strerror:
        return _refused(f"{path!r} is {exc.strerror}")
    return Failure(FAILED, f"cannot serve {path!r}: {exc.strerror or exc}")


def prior_state(real: str) -> FileState | Failure:
    """The file a write would replace: absent, or its size and SHA-256; a symlink or a file that is not regular
    is refused (a write never follows a final symlink)."""
    try:
        with _directory(real) as dir_fd:
            name = os.path.basename(real)
            try:
                status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return FileState(exists=False)
            if stat.S_ISLNK(status.st_mode):
                return _refused(f"{real!r} is a symlink: a write does not follow it")
            if not stat.S_ISREG(status.st_mode):
                raise not_regular(real, status.st_mode)
            fd = open_regular(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
            digest = hashlib.sha256()
            size = 0
            with os.fdopen(fd, "rb") as file:
                while chunk := file.read(_CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
            return FileState(exists=True, size=size, sha256=digest.hexdigest())
    except OSError as exc:
        return _failure(real, exc)


def read_text(real: str, line: int | None, limit: int | None, read_limit: int) -> str | Failure:
    """The file's text from line ``line`` (1-based), ``limit`` lines of it, as UTF-8; an error for text past
    ``read_limit`` bytes or that is not UTF-8 (or holds a NUL), never a partial answer."""
    try:
        with _directory(real) as dir_fd:
            fd = open_regular(os.path.basename(real), os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
        with os.fdopen(fd, "rb") as file:
            data = _lines(file, line or 1, limit, read_limit)
    except OSError as exc:
        return _failure(real, exc)
    if data is None:
        return Failure(FAILED, f"{real!r} is larger than the read limit ({read_limit:,} bytes): read it by lines")
    if b"\0" in data:
        return Failure(FAILED, f"{real!r} is not text (it holds a NUL byte)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Failure(FAILED, f"{real!r} is not UTF-8 text (byte {exc.start} of what was asked)")


def _lines(file: object, first: int, limit: int | None, read_limit: int) -> bytes | None:
    """Lines ``first`` to ``first + limit - 1`` (all when ``limit`` is None), or None past ``read_limit``."""
    readline = file.readline  # type: ignore[attr-defined]
    skipped = 1
    while skipped < first:
        piece = readline(_CHUNK)
        if not piece:
            return b""
        if piece.endswith(b"\n"):
            skipped += 1
    kept: list[bytes] = []
    size = 0
    lines = 0
    while limit is None or lines < limit:
        piece = readline(min(_CHUNK, read_limit + 1 - size))
        if not piece:
            break
        kept.append(piece)
        size += len(piece)
        if size > read_limit:
            return None
        if piece.endswith(b"\n"):
            lines += 1
    return b"".join(kept)


def write_text(real: str, content: str) -> FileState | Failure:
    """Write ``content`` to ``real`` atomically (a new file renamed over the old, with its permission bits);
    the new state, or why not."""
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        return Failure(FAILED, "the content is not valid Unicode text (it holds a lone surrogate)")
    name = os.path.basename(real)
    try:
        with _directory(real) as dir_fd:
            try:
                old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                mode = _NEW_FILE_MODE
            else:
                if stat.S_ISLNK(old.st_mode):
                    return _refused(f"{real!r} is a symlink: a write does not follow it")
                if not stat.S_ISREG(old.st_mode):
                    raise not_regular(real, old.st_mode)
                mode = stat.S_IMODE(old.st_mode)
            temporary = f".{name[:200]}.tinyacp-{secrets.token_hex(6)}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o600, dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(data)
                    file.flush()
                    os.fchmod(file.fileno(), mode)
                    os.fsync(file.fileno())
                os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=dir_fd)
                raise
    except OSError as exc:
        return _failure(real, exc)
    return FileState(exists=True, size=len(data), sha256=hashlib.sha256(data).hexdigest())
