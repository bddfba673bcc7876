"""The sandbox's pure part: what a :class:`~tinyacp.Bubblewrap` becomes on bwrap's command line, and the refusal
of a session asked outside the writable roots, for both clients' core (no process, no bwrap needed)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

import tinyacp
from tinyacp import _sandbox
from tinyacp._conversation import Call, Conversation
from tinyacp._limits import default_transfer_limits
from tinyacp._messages import ClientInfo, Initialize
from tinyacp.reader import default_reader_limits

pytestmark = pytest.mark.core


def pairs(args: list[str], option: str) -> list[tuple[str, str]]:
    """The (source, destination) of every ``option SRC DEST`` in ``args``."""
    return [(args[i + 1], args[i + 2]) for i, arg in enumerate(args) if arg == option]


def test_the_agent_runs_unprivileged_in_new_namespaces_that_die_with_us() -> None:
    args = _sandbox.bwrap_args(tinyacp.Bubblewrap(), cwd="/srv/p", network=True, uid=1000, gid=1000)
    for flag in ("--unshare-user", "--unshare-pid", "--die-with-parent", "--new-session"):
        assert flag in args
    assert args[args.index("--uid") + 1] == "1000"
    assert args[args.index("--gid") + 1] == "1000"
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert "--unshare-net" not in args  # an agent must reach its model by default


def test_root_is_mapped_to_an_unprivileged_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setattr(os, "getgid", lambda: 0)
    assert _sandbox.ids() == (1000, 1000)
    monkeypatch.setattr(os, "getuid", lambda: 1234)
    monkeypatch.setattr(os, "getgid", lambda: 99)
    assert _sandbox.ids() == (1234, 99)


def test_the_filesystem_is_read_only_but_for_the_cwd_and_the_writable_roots_bound_last() -> None:
    sandbox = tinyacp.Bubblewrap(writable=["/data/out"])
    args = _sandbox.bwrap_args(sandbox, cwd="/srv/p", roots=["/state/agent"], network=True)
    assert pairs(args, "--ro-bind")[0] == ("/", "/")
    binds = [("/srv/p", "/srv/p"), ("/state/agent", "/state/agent"), ("/data/out", "/data/out")]
    assert pairs(args, "--bind") == binds
    # Later mounts lie on top: the private /tmp and the emptied /run come before the writable roots.
    assert args.index("/tmp") < args.index("--bind")
    assert tuple(args[args.index("/run") - 1 : args.index("/run") + 1]) == ("--tmpfs", "/run")
    assert args[args.index("--chdir") + 1] == "/srv/p"


def test_readable_shows_only_the_system_and_the_paths_given() -> None:
    args = _sandbox.bwrap_args(tinyacp.Bubblewrap(readable=["/srv/docs"]), cwd="/srv/p", network=True)
    assert ("/", "/") not in pairs(args, "--ro-bind")
    assert ("/srv/docs", "/srv/docs") in pairs(args, "--ro-bind")
    assert {source for source, _ in pairs(args, "--ro-bind-try")} >= {"/usr", "/etc", "/lib"}


def test_network_none_is_the_default_of_the_use_and_false_cuts_it() -> None:
    assert _sandbox.network_on(tinyacp.Bubblewrap(), True) is True
    assert _sandbox.network_on(tinyacp.Bubblewrap(), False) is False
    assert _sandbox.network_on(tinyacp.Bubblewrap(network=True), False) is True
    assert _sandbox.network_on(tinyacp.Bubblewrap(network=False), True) is False
    assert "--unshare-net" in _sandbox.bwrap_args(tinyacp.Bubblewrap(network=False), cwd="/p", network=False)


def test_private_tmp_off_keeps_our_tmp() -> None:
    args = _sandbox.bwrap_args(tinyacp.Bubblewrap(private_tmp=False), cwd="/p", network=True)
    assert ("--tmpfs", "/tmp") not in list(itertools.pairwise(args))


def test_wrap_puts_extra_args_last_then_the_program_after_a_double_dash() -> None:
    sandbox = tinyacp.Bubblewrap(extra_args=["--setenv", "X", "1"])
    argv = _sandbox.wrap(["sh", "-c", "echo hi"], sandbox, cwd="/p", network=False, bwrap="/usr/bin/bwrap")
    assert argv[0] == "/usr/bin/bwrap"
    assert argv[-5:] == ["1", "--", "sh", "-c", "echo hi"]
    assert argv[argv.index("--") - 3 : argv.index("--")] == ["--setenv", "X", "1"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"writable": "/tmp"}, "not one path"),
        ({"readable": "/tmp"}, "not one path"),
        ({"writable": [1]}, "not a path"),
        ({"network": "off"}, "network"),
        ({"private_tmp": 1}, "private_tmp"),
        ({"extra_args": "--bind / /"}, "extra_args"),
    ],
)
def test_a_bad_value_is_a_type_error_that_says_what_is_expected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        tinyacp.Bubblewrap(**kwargs)  # type: ignore[arg-type]


def test_options_refuses_a_sandbox_of_another_type() -> None:
    with pytest.raises(TypeError, match="Bubblewrap"):
        tinyacp.Options(command=["agent"], sandbox={"writable": []})  # type: ignore[arg-type]


def test_relative_writable_paths_are_taken_from_the_current_directory() -> None:
    assert tinyacp.Bubblewrap(writable=["out"]).writable == (os.path.join(os.getcwd(), "out"),)


@pytest.mark.parametrize(
    ("path", "inside"),
    [
        ("/srv/p", True),
        ("/srv/p/", True),
        ("/srv/p/sub/dir", True),
        ("/srv/p/../p/x", True),
        ("/srv/project", False),  # a sibling that shares the prefix
        ("/srv", False),
        ("/srv/p/../q", False),
        ("/etc", False),
    ],
)
def test_within_compares_whole_path_components(path: str, inside: bool) -> None:
    assert _sandbox.within(path, ["/srv/p", "/state"]) is inside


def conversation(roots: tuple[str, ...] | None) -> Conversation:
    core = Conversation(
        epoch=1,
        transfer_limits=default_transfer_limits,
        reader_limits=default_reader_limits,
        policy=tinyacp.PermissionPolicy(),
        client_info=ClientInfo(name="t", version="1"),
        has_observer=True,
        sandbox_roots=roots,
    )
    core.agent = msgspec.json.decode(
        b'{"protocolVersion":1,"agentCapabilities":{"loadSession":true,'
        b'"sessionCapabilities":{"resume":{},"fork":{},"additionalDirectories":{}}}}',
        type=Initialize,
    )
    return core


@pytest.mark.parametrize("method", ["new", "load", "resume", "fork"])
def test_a_session_outside_the_roots_is_refused_before_anything_is_written(method: str) -> None:
    core = conversation(("/srv/p",))

    def call(cwd: str, extra: Sequence[str]) -> Call[Any]:
        if method == "new":
            return core.new_session(cwd, additional_directories=extra)
        if method == "load":
            return core.load_session("s", cwd, additional_directories=extra)
        if method == "resume":
            return core.resume_session("s", cwd, additional_directories=extra)
        return core.fork_session("s", cwd, additional_directories=extra)

    with pytest.raises(tinyacp.OutsideSandbox, match="'/srv/other' lies outside"):
        call("/srv/other", ())
    with pytest.raises(tinyacp.OutsideSandbox, match="additional directory '/etc'"):
        call("/srv/p", ["/srv/p/sub", "/etc"])
    assert isinstance(tinyacp.OutsideSandbox("x"), tinyacp.UsageError)
    # Nothing was sent for the refused calls, so the next one is accepted and goes out.
    message = call("/srv/p/sub", ["/srv/p"])
    assert b'"cwd":"/srv/p/sub"' in message.message.raw


def test_without_a_sandbox_any_directory_is_sent() -> None:
    assert b'"cwd":"/etc"' in conversation(None).new_session("/etc").message.raw
