"""Where the ``tinyacp`` command keeps its config and its journals: the platform's usual directories.

The rules are the XDG Base Directory specification's on Linux and the BSDs, and ``~/Library`` on macOS, written
out here rather than taken from ``platformdirs`` so the command adds no dependency. The XDG variables are honoured
on every platform when they are set to an absolute path (the spec says a relative one is ignored), which also lets
tests and CI jobs redirect both directories.

Journals hold prompts, file contents and tool output, so their directory is held to the rule ssh applies to
``~/.ssh``: it must belong to the user and be writable by no one else, or the command refuses it. Each run's
journal is a new file (``O_CREAT|O_EXCL``, never through a link) whose name carries a random part, so nothing
planted in advance can receive it.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import stat
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ._exit import UsageProblem

__all__ = [
    "APP",
    "UnsafeDirectory",
    "config_dir",
    "default_config_path",
    "journal_dir",
    "new_journal",
    "new_private_file",
    "private_dir",
    "state_dir",
]

APP = "tinyacp"


def _xdg(name: str, env: Mapping[str, str]) -> Path | None:
    value = env.get(name, "")
    if value and os.path.isabs(value):
        return Path(value)
    return None


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """The directory of ``config.toml``: ``$XDG_CONFIG_HOME/tinyacp``, else ``~/.config/tinyacp``
    (macOS: ``~/Library/Application Support/tinyacp``)."""
    env = os.environ if env is None else env
    base = _xdg("XDG_CONFIG_HOME", env)
    if base is None:
        home = _home(env)
        base = home / "Library" / "Application Support" if sys.platform == "darwin" else home / ".config"
    return base / APP


def default_config_path() -> Path:
    """Where the config file is looked for."""
    return config_dir() / "config.toml"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where run records go: ``$XDG_STATE_HOME/tinyacp``, else ``~/.local/state/tinyacp``
    (macOS: ``~/Library/Application Support/tinyacp``, as platformdirs does)."""
    env = os.environ if env is None else env
    base = _xdg("XDG_STATE_HOME", env)
    if base is None:
        home = _home(env)
        base = home / "Library" / "Application Support" if sys.platform == "darwin" else home / ".local" / "state"
    return base / APP


def journal_dir(env: Mapping[str, str] | None = None) -> Path:
    """The directory ``tinyacp prompt`` and ``chat`` journal every run to by default."""
    return state_dir(env) / "journals"


class UnsafeDirectory(PermissionError):
    """A directory for private files that others could tamper with; the message says how to fix it. An OSError
    (PermissionError), so a caller that handles "cannot write there" handles this too."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) if needed; a directory we create is readable by its owner only
    (the XDG spec asks 0700 for these directories: journals hold prompts and file contents).

    Raises:
        UnsafeDirectory: ``path`` belongs to another user, or others can write to it.
        OSError: it cannot be created.
    """
    missing = [path]
    while not missing[-1].parent.exists() and missing[-1].parent != missing[-1]:
        missing.append(missing[-1].parent)
    for directory in reversed(missing):  # each one we create is 0700, whatever the umask lets mkdir(parents) do
        directory.mkdir(mode=0o700, exist_ok=True)
    check_private(path, os.stat(path))
    return path


def check_private(path: Path, status: os.stat_result) -> None:
    """Refuse a directory that is not ours (root's will do) or that the group or others may write to, as ssh does.

    Raises:
        UnsafeDirectory: with a one-line message that names the fix.
    """
    quoted = shlex.quote(str(path))
    if not stat.S_ISDIR(status.st_mode):
        raise UnsafeDirectory(f"{path} is not a directory: move it away, or use --journal PATH or --no-journal")
    if status.st_uid not in (os.geteuid(), 0):
        raise UnsafeDirectory(
            f"the directory {path} belongs to another user (uid {status.st_uid}): remove it, or set XDG_STATE_HOME "
            "to a directory of yours, or use --journal PATH or --no-journal"
        )
    if status.st_mode & 0o022:
        raise UnsafeDirectory(
            f"the directory {path} is writable by others (mode {stat.S_IMODE(status.st_mode):04o}): "
            f"run `chmod go-w {quoted}`, or use --journal PATH or --no-journal"
        )


_NAME_TRIES = 8  # a 64-bit random part collides with nothing; the loop only guards against a planted name


def new_private_file(directory: Path, stem: str, suffix: str) -> Path:
    """Create a new empty file ``STEM-RANDOM SUFFIX`` in ``directory``, readable by its owner only: ``O_CREAT|O_EXCL``
    and ``O_NOFOLLOW``, through a descriptor of the directory checked by :func:`check_private`.

    Raises:
        UnsafeDirectory: the directory fails :func:`check_private`.
        OSError: the file cannot be created.
    """
    import secrets  # here: it imports hashlib and random, which the command's start does not need

    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        check_private(directory, os.fstat(dir_fd))
        for _ in range(_NAME_TRIES):
            name = f"{stem}-{secrets.token_hex(8)}{suffix}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
            except FileExistsError:
                continue
            os.close(fd)
            return directory / name
        raise FileExistsError(errno.EEXIST, "no free file name (is something planting names here?)", str(directory))
    finally:
        os.close(dir_fd)


def new_journal(agent_name: str) -> Path:
    """A new journal for one run, ``STAMP-AGENT-RANDOM.jsonl`` in the private :func:`journal_dir`.

    Raises:
        UsageProblem: the journal directory is refused (:class:`UnsafeDirectory`) or the file cannot be created.
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", agent_name)[:40] or "agent"
    try:
        return new_private_file(private_dir(journal_dir()), f"{stamp}-{name}", ".jsonl")
    except UnsafeDirectory as exc:
        raise UsageProblem(f"refusing the journal directory: {exc}") from None
    except OSError as exc:
        raise UsageProblem(f"cannot create the journal: {exc} (use --journal PATH or --no-journal)") from None
