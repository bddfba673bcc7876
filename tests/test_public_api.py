"""The public surface: ``tinyacp.__all__`` is exactly what the package exports, and the one exception tree is
what the errors module draws (httpx's ``test_exported_members`` idea)."""

from __future__ import annotations

import ast
import builtins
import inspect
import os
import re
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest

import tinyacp
from tinyacp import _errors

INIT = Path(tinyacp.__file__)


def group_then_name(name: str) -> tuple[int, str]:
    """The order of ``__all__``: CONSTANTS, then Classes, then everything else; code-point order in each group
    (the isort style that ruff's RUF022 keeps)."""
    if name.isupper():
        return (0, name)
    if name[0].isupper():
        return (1, name)
    return (2, name)


def names_bound_in_init() -> set[str]:
    """Every name ``__init__.py`` binds from the package itself: its relative imports (those under
    TYPE_CHECKING too, which ``__getattr__`` serves lazily) and its own top-level definitions."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            names.update(alias.asname or alias.name for alias in node.names)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_all_is_sorted_constants_then_classes_then_the_rest() -> None:
    assert tinyacp.__all__ == sorted(tinyacp.__all__, key=group_then_name)
    assert len(set(tinyacp.__all__)) == len(tinyacp.__all__)


@pytest.mark.parametrize("name", tinyacp.__all__)
def test_every_name_in_all_is_importable(name: str) -> None:
    assert getattr(tinyacp, name) is not None
    namespace: dict[str, object] = {}
    exec(f"from tinyacp import {name}", namespace)
    assert namespace[name] is getattr(tinyacp, name)


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from tinyacp import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(tinyacp.__all__)


HELPERS = {"annotations", "TYPE_CHECKING"}
"""Names the package binds for its own code, not for its users: the future import and the type-checking flag."""


def test_every_public_name_of_the_package_is_in_all() -> None:
    public = {name for name in names_bound_in_init() if not name.startswith("_")} - HELPERS
    assert public <= set(tinyacp.__all__)
    assert set(tinyacp.__all__) - public == {"__version__"}


def test_nothing_public_is_left_in_the_namespace_outside_all() -> None:
    """What the module namespace holds beyond ``__all__`` is private, a submodule or one of the helpers."""
    extra = {
        name
        for name, value in vars(tinyacp).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name not in HELPERS
    }
    assert extra <= set(tinyacp.__all__)


def test_lazy_names_are_served_and_unknown_names_raise_attribute_error() -> None:
    assert tinyacp.AsyncClient.__name__ == "AsyncClient"
    assert tinyacp.JsonlJournal.__name__ == "JsonlJournal"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        tinyacp.Nope  # noqa: B018


def _fresh_interpreter(probe: str) -> subprocess.CompletedProcess[str]:
    """Run ``probe`` in a new interpreter with this tinyacp on its path; it must exit 0."""
    src = str(Path(tinyacp.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=src)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


def test_import_tinyacp_loads_the_errors_and_the_version_and_the_rest_on_first_use() -> None:
    """A program (or ``tinyacp --help``) that imports the package pays for msgspec and the clients only when it
    first touches them; then every name is the same object as before."""
    probe = (
        "import sys, tinyacp\n"
        "print(sorted(m for m in ('msgspec', 'tinyacp._client', 'tinyacp._messages') if m in sys.modules))\n"
        "assert isinstance(tinyacp.AgentExited('x'), tinyacp.TinyAcpError)\n"
        "print(tinyacp.Client.__module__, 'msgspec' in sys.modules)\n"
        "import tinyacp._client\n"
        "print(tinyacp.Client is tinyacp._client.Client)\n"
    )
    done = _fresh_interpreter(probe)
    assert done.stdout.splitlines() == ["[]", "tinyacp._client True", "True"]


def test_tinyacp_help_loads_neither_msgspec_nor_the_limits() -> None:
    """``tinyacp --help`` is what a newcomer runs first: it imports the parser's light modules only. msgspec, the
    limits and the line reader (with their dataclasses and ``inspect``) load when a subcommand that needs them
    runs. (``typing`` the parser does import: 2.5 ms of a 70 ms ``--help``, see benchmarks/RESULTS.md.)"""
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['tinyacp', '--help']\n"
        "try:\n"
        "    runpy.run_module('tinyacp', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('msgspec', 'tinyacp._limits', 'tinyacp.reader', 'dataclasses', 'inspect')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = _fresh_interpreter(probe)
    assert "usage: tinyacp" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"


# -- one API, both ways ---------------------------------------------------------------------------------------

PLAIN_IN_BOTH = {"kill", "session_state", "stderr_tail", "prompt_stream"}
"""The methods that neither client waits in: plain in ``AsyncClient`` too (a stream waits when iterated)."""

STREAMS = {"prompt_stream": ("PromptStream", "AsyncPromptStream")}
"""The methods whose result is a stream: an iterator in ``Client``, an async iterator in ``AsyncClient``."""


def public_methods(cls: type) -> dict[str, Callable[..., object]]:
    return {
        name: getattr(cls, name)
        for name in dir(cls)
        if not name.startswith("_") and inspect.isfunction(getattr(cls, name))
    }


def test_both_clients_take_every_call_with_the_same_signature_and_docstring() -> None:
    sync_methods = public_methods(tinyacp.Client)
    async_methods = public_methods(tinyacp.AsyncClient)
    assert set(async_methods) == set(sync_methods)
    assert {"initialize", "new_session", "load_session", "resume_session", "prompt", "set_config_option"} <= set(
        sync_methods
    )
    for name, sync_method in sync_methods.items():
        async_method = async_methods[name]
        shown = inspect.signature(sync_method)
        if name in STREAMS:
            sync_stream, async_stream = STREAMS[name]
            assert shown.return_annotation == sync_stream, name
            shown = shown.replace(return_annotation=async_stream)
        assert shown == inspect.signature(async_method), name
        assert next(iter(shown.parameters)) == "self", name
        assert "CallSpec" not in str(shown), name  # the answer's type, as callers get it
        for method in (sync_method, async_method):
            doc = inspect.getdoc(method)
            assert doc and not doc.startswith("As "), f"{name} needs its own docstring"
        assert not inspect.iscoroutinefunction(sync_method), name
        assert inspect.iscoroutinefunction(async_method) is (name not in PLAIN_IN_BOTH), name


def test_a_call_reads_the_same_in_both_clients() -> None:
    for name in ("new_session", "prompt", "list_sessions"):
        sync_method, async_method = getattr(tinyacp.Client, name), getattr(tinyacp.AsyncClient, name)
        doc = sync_method.__doc__
        assert doc and "Raises:" in doc
        assert async_method.__doc__ == doc
        assert sync_method.__name__ == async_method.__name__ == name
        assert (sync_method.__qualname__, async_method.__qualname__) == (f"Client.{name}", f"AsyncClient.{name}")
    assert "CancelledError" in (
        tinyacp.AsyncClient.prompt.__doc__ or ""
    )  # where the shells differ, the one text says so


CALLS = (
    "initialize",
    "authenticate",
    "logout",
    "new_session",
    "load_session",
    "resume_session",
    "fork_session",
    "close_session",
    "delete_session",
    "list_sessions",
    "set_mode",
    "set_config_option",
    "set_model",
    "prompt",
    "request",
    "notify",
)
ANY_CALL_RAISES = {
    "AgentExited",
    "AgentTimeout",
    "ObserverError",
    "ClientBusy",
    "ClientClosed",
    "ReaderExhaustion",
    "TransferLimitExceeded",
    "ProtocolViolation",
    "ValueError",
}


@pytest.mark.parametrize("client", [tinyacp.Client, tinyacp.AsyncClient])
def test_every_call_lists_what_any_call_may_raise_once(client: type) -> None:
    for name in CALLS:
        doc = inspect.getdoc(getattr(client, name))
        assert doc is not None
        named = re.findall(r"^    (\w+):", doc.split("\nRaises:\n", 1)[1], flags=re.MULTILINE)
        assert set(named) >= ANY_CALL_RAISES, name
        assert len(named) == len(set(named)), f"{name} names an error twice"
        for error in named:
            assert isinstance(getattr(tinyacp, error, None) or getattr(builtins, error), type), (name, error)


# -- the exception tree --------------------------------------------------------------------------------------


def error_classes() -> dict[str, type[BaseException]]:
    return {
        name: value
        for name, value in vars(_errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == _errors.__name__
    }


def test_every_exception_derives_from_tinyacp_error_and_is_exported() -> None:
    classes = error_classes()
    assert len(classes) >= 17
    for name, cls in classes.items():
        assert issubclass(cls, tinyacp.TinyAcpError), name
        assert getattr(tinyacp, name) is cls
        assert name in _errors.__all__
        assert cls.__doc__ and "\n" not in cls.__doc__.strip(), f"{name} needs a one-line docstring"


def test_limit_and_timeout_errors_are_what_callers_catch() -> None:
    assert issubclass(tinyacp.ReaderExhaustion, tinyacp.LimitExceeded)
    assert issubclass(tinyacp.TransferLimitExceeded, tinyacp.LimitExceeded)
    assert issubclass(tinyacp.AgentTimeout, TimeoutError)
    assert issubclass(tinyacp.AgentTimeout, tinyacp.AgentError)
    assert tinyacp.reader.ReaderExhaustion is tinyacp.ReaderExhaustion


def drawn_tree() -> dict[str, str | None]:
    """The errors module docstring's drawing, as {class: drawn parent}."""
    doc = _errors.__doc__
    assert doc is not None
    drawing = doc.split("::", 1)[1]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for text in drawing.splitlines():
        found = re.match(r"^(\s*(?:[│├└]\s*|── )*)([A-Z]\w+)\s", text + " ")
        if not found or not text.strip():
            continue
        if stack and not re.search(r"[├└]── ", text):
            break  # the drawing ended: prose follows
        column = len(found.group(1))
        while stack and stack[-1][0] >= column:
            stack.pop()
        parents[found.group(2)] = stack[-1][1] if stack else None
        stack.append((column, found.group(2)))
    return parents


def test_the_errors_docstring_draws_every_class_under_its_real_parent() -> None:
    drawn = drawn_tree()
    classes = error_classes()
    assert set(drawn) == set(classes)
    for name, parent in drawn.items():
        cls = classes[name]
        if parent is None:
            assert cls is tinyacp.TinyAcpError
            continue
        ours = [base for base in cls.__bases__ if issubclass(base, tinyacp.TinyAcpError)]
        assert [base.__name__ for base in ours] == [parent], name
