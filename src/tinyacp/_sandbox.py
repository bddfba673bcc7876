"""The agent in a bubblewrap sandbox: what :class:`Bubblewrap` asks for, turned into ``bwrap``'s arguments.

Started by tinyacp alone, an agent can write wherever its user can: a permission answer only asks it to behave
(``docs/not-a-sandbox.md``). :class:`Bubblewrap` runs it inside `bubblewrap <https://github.com/containers/bubblewrap>`_
(``bwrap``, what Flatpak uses and what Codex's and Claude Code's own sandboxes build on) instead of a jail of our
own. Everything here but :func:`check_available` and :func:`prepare_roots` is pure: values in, an argv out.

What the sandbox is made of (:func:`bwrap_args`), and why:

- ``--unshare-user`` with an unprivileged uid and gid (ours, or 1000 when we are root): started by root, bwrap
  would leave the agent every capability, and an agent's shell tool has been seen to ``mount -o remount,rw,bind /``
  and write outside. In the user namespace the agent holds no capability over our mounts; the kernel locks the
  read-only binds it inherits (``MNT_LOCK_READONLY``), so a user namespace of its own (``unshare -Urm``) cannot
  make them writable either, while an agent that runs its own bwrap inside (Codex) still can.
  ``--cap-drop ALL`` says the same once more, for whatever the uid map would leave.
- ``--unshare-pid``, ``--die-with-parent``, ``--new-session``: a PID namespace whose init is bwrap's, so when the
  bwrap process (our child, leading its own process group) dies, the kernel kills everything inside; no
  ``TIOCSTI`` into our terminal.
- the filesystem: ``/`` read-only (or only the system's directories and ``readable``), a fresh ``/dev`` and
  ``/proc``, a private ``/tmp``, ``/run`` emptied (a Unix socket on a read-only mount can still be connected to:
  a Docker or D-Bus socket there would be a way out), then the writable roots bound read-write: the agent's cwd
  and ``writable``.
- ``--unshare-net`` when the network is cut: loopback only, inside.

Any program is wrapped the same way: :func:`plan` (checked, for a real start: ``network_default=False`` and the
agent's roots for a served terminal command) or :func:`wrap` (pure, the argv alone).
"""

from __future__ import annotations

import errno
import functools
import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ._errors import OutsideSandbox, SandboxUnavailable, SpawnError

__all__ = [
    "SYSTEM_READABLE",
    "Bubblewrap",
    "Plan",
    "bwrap_args",
    "check_available",
    "check_within",
    "ids",
    "network_on",
    "plan",
    "prepare_roots",
    "within",
    "wrap",
    "writable_roots",
]

SYSTEM_READABLE: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
"""What an agent sees besides ``readable`` when ``readable`` is given: the system's programs, libraries and
configuration, without which no interpreter starts (each one only if it exists here)."""

UNPRIVILEGED_ID = 1000
"""The uid and gid the agent gets when tinyacp runs as root: the first ordinary user of most distributions."""

INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"

_RESOLVER = "/run/systemd/resolve"
"""Kept (read-only) in the emptied ``/run``: on systemd-resolved machines ``/etc/resolv.conf`` points into it, and
an agent must resolve its model's host."""

_PROBE_TIMEOUT = 10.0
"""The availability probe (one bwrap starting ``true``) takes a few ms; a machine this loaded has bigger trouble."""


def _paths(name: str, value: object) -> tuple[str, ...]:
    """``value`` as a tuple of absolute, normalised paths (a relative one is taken from our working directory).

    Raises:
        TypeError: ``value`` is one string, or holds something that is not a path.
    """
    if isinstance(value, str | bytes | os.PathLike):
        raise TypeError(f"{name} is a list of directories, not one path: {name}=[{os.fsdecode(value)!r}]")
    if not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list of directories, not {type(value).__name__}")
    paths = []
    for item in value:
        if not isinstance(item, str | os.PathLike):
            raise TypeError(f"{name} holds {item!r}, which is not a path")
        path = os.fspath(item)
        if not isinstance(path, str) or not path or "\0" in path:
            raise TypeError(f"{name} holds {item!r}, which is not a path")
        paths.append(os.path.abspath(path))
    return tuple(paths)


@dataclass(frozen=True, slots=True)
class Bubblewrap:
    """Run a program inside bubblewrap: it may write only in its working directory and ``writable``.

    Pass it as ``Options(sandbox=Bubblewrap(...))``. Linux only; making the client checks that ``bwrap`` works
    here and raises :class:`~tinyacp.SandboxUnavailable` if not: there is never a silent unsandboxed run.

    Args:
        writable: directories the program may write in, besides its working directory (which is always
            writable). Each must exist when the program starts. A relative path is taken from the current
            directory when the value is made.
        readable: None (the default): the whole filesystem is visible, read-only. A list: only these directories
            are visible (read-only), with the system's (:data:`SYSTEM_READABLE`) and the writable ones.
        network: None: the default of where the sandbox is used (shared for an agent, which must reach its model;
            cut for a served terminal command). True: shared. False: cut, only a loopback of its own inside.
        private_tmp: an empty ``/tmp`` of the program's own (a writable root under ``/tmp`` is still bound in,
            and so, read-only, is the directory under ``/tmp`` that holds the program or a file on its command line).
        extra_args: more ``bwrap`` options, placed after tinyacp's and before the program (for instance
            ``["--ro-bind", "/srv/data", "/srv/data"]``); they can loosen the sandbox.

    Raises:
        TypeError: a path list is one string, or holds something that is not a path; ``network`` or
            ``private_tmp`` is not a bool; ``extra_args`` is not a list of strings.
    """

    writable: Sequence[str | os.PathLike[str]] = ()
    readable: Sequence[str | os.PathLike[str]] | None = None
    network: bool | None = None
    private_tmp: bool = True
    extra_args: Sequence[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "writable", _paths("writable", self.writable))
        if self.readable is not None:
            object.__setattr__(self, "readable", _paths("readable", self.readable))
        if self.network is not None and not isinstance(self.network, bool):
            raise TypeError(f"network must be None, True or False, not {self.network!r}")
        if not isinstance(self.private_tmp, bool):
            raise TypeError(f"private_tmp must be True or False, not {self.private_tmp!r}")
        if isinstance(self.extra_args, str) or not all(isinstance(arg, str) for arg in self.extra_args):
            raise TypeError("extra_args must be a list of strings, such as ['--ro-bind', '/srv', '/srv']")
        object.__setattr__(self, "extra_args", tuple(self.extra_args))


def _strs(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The paths of a :class:`Bubblewrap` as str (they are, once it is made; the type says what it accepts)."""
    return [os.fspath(path) for path in paths]


def network_on(sandbox: Bubblewrap, default: bool) -> bool:
    """Whether the program shares our network: ``sandbox.network``, or ``default`` where it is None (True for an
    agent, False for a served command)."""
    return default if sandbox.network is None else sandbox.network


def ids() -> tuple[int, int]:
    """The uid and gid inside: ours, or :data:`UNPRIVILEGED_ID` for root's (root gets no way out)."""
    return os.getuid() or UNPRIVILEGED_ID, os.getgid() or UNPRIVILEGED_ID


def _namespace_args(uid: int, gid: int, *, network: bool) -> list[str]:
    args = ["--unshare-user", "--uid", str(uid), "--gid", str(gid), "--unshare-pid", "--unshare-ipc"]
    if not network:
        args.append("--unshare-net")
    return [*args, "--die-with-parent", "--new-session", "--cap-drop", "ALL"]


def _visible_args(readable: object) -> list[str]:
    """What is visible before the writable roots: ``/`` read-only, or the system's directories only."""
    if readable is None:
        return ["--ro-bind", "/", "/"]
    args = []
    for path in SYSTEM_READABLE:
        args += ["--ro-bind-try", path, path]
    return args


def bwrap_args(
    sandbox: Bubblewrap,
    *,
    cwd: str,
    roots: Sequence[str] = (),
    network: bool,
    uid: int = UNPRIVILEGED_ID,
    gid: int = UNPRIVILEGED_ID,
    program_dirs: Sequence[str] = (),
) -> list[str]:
    """bwrap's options for ``sandbox``, the program's arguments not included (pure).

    Args:
        sandbox: what was asked for.
        cwd: the program's working directory (absolute), writable and where it starts.
        roots: more writable directories (absolute) besides ``cwd`` and ``sandbox.writable``, such as an agent's
            state directories.
        network: whether the network is shared (see :func:`network_on`).
        uid: the uid inside (see :func:`ids`). gid: the gid inside.
        program_dirs: directories under ``/tmp`` that hold the program or a file on its command line (see
            :func:`program_dirs`): bound read-only over the private ``/tmp``, so that a program installed there
            (a virtual environment made by ``mktemp -d``, a clone in a temporary directory) still starts.

    Returns:
        The options, in bwrap's order: later mounts lie on top of earlier ones.
    """
    args = _namespace_args(uid, gid, network=network)
    args += _visible_args(sandbox.readable)
    args += ["--dev", "/dev", "--proc", "/proc"]
    if sandbox.private_tmp:
        args += ["--tmpfs", "/tmp"]
        for path in program_dirs:
            args += ["--ro-bind", path, path]
    args += ["--tmpfs", "/run", "--ro-bind-try", _RESOLVER, _RESOLVER]
    for path in _strs(sandbox.readable or ()):
        args += ["--ro-bind", path, path]
    for path in writable_roots(sandbox, cwd=cwd, roots=roots):
        args += ["--bind", path, path]
    args += ["--chdir", cwd]
    return [*args, *sandbox.extra_args]


def program_dirs(argv: Sequence[str], cwd: str, env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The directories right under ``/tmp`` that hold the program (found as execvp would find it, symlinks
    followed), an existing path named on its command line, or for ``python -m tinyacp.…`` (the demo agent) this
    package: what a private ``/tmp`` must not hide from it.

    Only ``/tmp``'s own entries are named (``/tmp/tmp.x1y2`` for ``/tmp/tmp.x1y2/venv/bin/python``), read-only:
    the program reads its own files there, as it would anywhere else on a read-only ``/``.
    """
    found: list[str] = []
    program = argv[0] if argv else ""
    if program and os.sep not in program:
        search = (env if env is not None else os.environ).get("PATH", os.defpath)
        program = shutil.which(program, mode=os.F_OK, path=search) or program
    words = [program, *argv[1:]]
    if any(a == "-m" and b.split(".")[0] == "tinyacp" for a, b in itertools.pairwise(argv)):
        words.append(os.path.dirname(os.path.abspath(__file__)))  # the demo agent: this package, where it lies
    for word in words:
        if not word or "\0" in word:
            continue
        path = word if os.path.isabs(word) else os.path.join(cwd, word)
        for name in dict.fromkeys((os.path.abspath(path), os.path.realpath(path))):
            parts = name.split(os.sep)
            if len(parts) > 2 and parts[1] == "tmp" and os.path.exists(name):
                found.append(os.sep.join(parts[:3]))
    return tuple(dict.fromkeys(found))


def writable_roots(sandbox: Bubblewrap, *, cwd: str, roots: Sequence[str] = ()) -> tuple[str, ...]:
    """Every directory the program may write in: ``cwd``, ``roots`` and ``sandbox.writable``, each once (pure)."""
    named = (cwd, *roots, *_strs(sandbox.writable))
    return tuple(dict.fromkeys(map(os.path.normpath, named)))


def wrap(
    argv: Sequence[str],
    sandbox: Bubblewrap,
    *,
    cwd: str,
    roots: Sequence[str] = (),
    network: bool,
    bwrap: str = "bwrap",
    uid: int = UNPRIVILEGED_ID,
    gid: int = UNPRIVILEGED_ID,
) -> list[str]:
    """``argv`` run inside ``sandbox``: the whole command line, bwrap first (pure).

    What the agent's process and a served terminal command both start. ``network`` is already decided
    (:func:`network_on` with the default of the use); ``uid`` and ``gid`` are usually :func:`ids`.

    Returns:
        ``[bwrap, *options, "--", *argv]``.
    """
    options = bwrap_args(sandbox, cwd=cwd, roots=roots, network=network, uid=uid, gid=gid)
    return [bwrap, *options, "--", *argv]


def within(path: str, roots: Iterable[str]) -> bool:
    """Whether ``path`` (absolute) is one of ``roots`` or lies under one, by its normalised text (pure).

    ``..`` is resolved by the text; a symlink is not followed: the sandbox itself decides where writes land, this
    check only refuses early what it would refuse anyway.
    """
    path = os.path.normpath(path)
    for named in roots:
        root = os.path.normpath(named)
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return True
    return False


def check_within(cwd: str, additional_directories: Sequence[str], roots: Sequence[str] | None) -> None:
    """Refuse a session's directories outside the sandbox's writable roots (None: not sandboxed) (pure).

    Raises:
        OutsideSandbox: ``cwd`` or an additional directory lies outside every root; nothing was written.
    """
    if roots is None:
        return
    for name, path in (("cwd", cwd), *(("an additional directory", extra) for extra in additional_directories)):
        if os.path.isabs(path) and not within(path, roots):
            raise OutsideSandbox(
                f"the session's {name} {path!r} lies outside the sandbox's writable roots ({', '.join(roots)}): the "
                "agent could not write there; add it to Bubblewrap(writable=...). Nothing was written"
            )


def prepare_roots(
    sandbox: Bubblewrap, cwd: str | os.PathLike[str] | None, roots: Sequence[str] = ()
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """Where the program starts, what bwrap binds writable, and where a session may be asked for.

    The working directory and the writable roots are checked to exist and resolved: bwrap binds each at its real
    path, so a symlink on the way (``/home`` pointing elsewhere) leads where it does outside. A session's directory
    is accepted under either name of a root, the caller's or the real one.

    Returns:
        ``(cwd, bound, allowed)``: the program's working directory as the caller named it (absolute), the real
        paths to bind read-write (the working directory's first), and both names of each.

    Raises:
        SandboxUnavailable: the working directory or a writable directory does not exist or is not a directory
            (bwrap could not bind it).
    """
    start = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    named = writable_roots(sandbox, cwd=start, roots=[os.path.abspath(root) for root in roots])
    for root in named:
        if not os.path.isdir(root):
            raise SandboxUnavailable(f"the sandbox's writable directory {root!r} does not exist or is not a directory")
    bound = tuple(dict.fromkeys(os.path.realpath(root) for root in named))
    return start, bound, tuple(dict.fromkeys((*named, *bound)))


def check_available(*, network: bool) -> str:
    """The path of a ``bwrap`` that can make the sandbox here, found and tried once per process.

    Raises:
        SandboxUnavailable: not Linux, no ``bwrap`` on the PATH, or bwrap cannot make the namespaces (no user
            namespaces in this kernel, or they are forbidden to us); the message says what to do.
    """
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"the bubblewrap sandbox needs Linux; this is {sys.platform}")
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable(f"no bwrap on the PATH: {INSTALL_HINT}")
    problem = _probe(path, network)
    if problem is not None:
        raise SandboxUnavailable(problem)
    return path


@functools.cache
def _probe(path: str, network: bool) -> str | None:
    """Start ``true`` in the sandbox's namespaces once: what went wrong, or None."""
    uid, gid = ids()
    argv = [path, *_namespace_args(uid, gid, network=network), "--ro-bind", "/", "/", "--dev", "/dev"]
    argv += ["--proc", "/proc", "--", "true"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=_PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap ({path}) could not be tried: {exc}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip()[-500:] or f"exit code {done.returncode}"
    return (
        f"bwrap ({path}) cannot make the sandbox here: {said}. It needs unprivileged user namespaces: check "
        "sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0 (and, on Ubuntu 24.04 and "
        "later, kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)"
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """A sandboxed start, decided: what to run and what it implies.

    Attributes:
        argv: the whole command line: bwrap's path, its options, ``--``, the program's argv.
        options: bwrap's options alone, as a record says how the run was sandboxed.
        allowed: where a session may be asked (each writable root under the caller's name and its real one).
        network: whether the network is shared.
        writable: the directories bound writable, by their real paths (the working directory first).
    """

    argv: tuple[str, ...]
    options: tuple[str, ...]
    allowed: tuple[str, ...]
    network: bool
    writable: tuple[str, ...] = ()

    def record(self) -> dict[str, object]:
        """How the program was sandboxed, as JSON values: what a journal's epoch record or a report says."""
        return {
            "kind": "bubblewrap",
            "bwrap": list(self.options),
            "writable": list(self.writable),
            "network": self.network,
        }


def plan(
    sandbox: Bubblewrap,
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None = None,
    roots: Sequence[str] = (),
    network_default: bool = True,
    find_program: bool = True,
) -> Plan:
    """Check that ``sandbox`` can be made here and decide the command that starts ``argv`` inside it.

    Args:
        sandbox: what was asked for.
        argv: the program and its arguments.
        cwd: its working directory (None: ours).
        env: its environment (None: ours), whose ``PATH`` finds a bare program name.
        roots: more writable directories besides ``cwd`` and ``sandbox.writable`` (a served command gets the
            agent's roots this way).
        network_default: what ``network=None`` means here: True for an agent, False for a served command.
        find_program: check that ``argv[0]`` can be found (a caller that reports a missing program its own way
            leaves it to the start).

    Raises:
        SandboxUnavailable: bwrap cannot run here, or a writable directory is missing (see
            :func:`check_available`, :func:`prepare_roots`).
        SpawnError: the program is not found (bwrap would only say so on its stderr), with ``find_program``.
    """
    network = network_on(sandbox, network_default)
    path = check_available(network=network)
    start, bound, allowed = prepare_roots(sandbox, cwd, roots)
    if find_program:
        _find_program(argv[0], start, env)
    uid, gid = ids()
    real = Bubblewrap(bound[1:], sandbox.readable, sandbox.network, sandbox.private_tmp, sandbox.extra_args)
    shown = program_dirs(argv, start, env)
    options = bwrap_args(real, cwd=bound[0], network=network, uid=uid, gid=gid, program_dirs=shown)
    return Plan((path, *options, "--", *argv), tuple(options), allowed, network, bound)


def _find_program(program: str, cwd: str, env: Mapping[str, str] | None) -> None:
    """Raise :class:`~tinyacp.SpawnError` when ``program`` cannot be found as execvp would look it up, with the
    OSError that starting it would have met as its ``__cause__``."""
    if os.sep in program:
        found: str | None = os.path.join(cwd, program)
    else:
        search = (env if env is not None else os.environ).get("PATH", os.defpath)
        found = shutil.which(program, mode=os.F_OK, path=search)
    if found is None or not os.path.exists(found):
        cause: OSError = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    elif os.path.isdir(found) or not os.access(found, os.X_OK):
        cause = PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    else:
        return
    raise SpawnError(f"cannot start the agent {program!r} in the sandbox: {cause.strerror}") from cause
