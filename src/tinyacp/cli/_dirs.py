"""Where the ``tinyacp`` command keeps its config and its journals: the platform's usual directories.

The rules are the XDG Base Directory specification's on Linux and the BSDs, and ``~/Library`` on macOS, written
out here rather than taken from ``platformdirs`` so the command adds no dependency. The XDG variables are honoured
on every platform when they are set to an absolute path (the spec says a relative one is ignored), which also lets
tests and CI jobs redirect both directories.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["APP", "config_dir", "journal_dir", "private_dir", "state_dir"]

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
    """The directory ``tinyacp prompt`` journals every run to by default."""
    return state_dir(env) / "journals"


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) if needed; a directory we create is readable by its owner only
    (the XDG spec asks 0700 for these directories: journals hold prompts and file contents)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path
