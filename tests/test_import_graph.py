"""No import circle in the package: every module imports alone in a fresh interpreter, and the graph of the
package's own imports, those inside functions included, has no cycle (an import inside a function hides a circle
from the first check until the function runs). An import under ``if TYPE_CHECKING:`` never runs: a type may name
a module that imports the annotated one."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tinyacp

PACKAGE = Path(tinyacp.__file__).parent
SRC = PACKAGE.parent
TIMEOUT = 60.0


def modules_of(package: Path) -> dict[str, Path]:
    """Every module of the package by its dotted name (a sub-package by its own name, for its ``__init__``)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(node: ast.Import | ast.ImportFrom, package: str, modules: dict[str, Path]) -> list[str]:
    """The dotted names a statement imports: ``from .x import y`` is the module ``x.y`` when there is one."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        module = ".".join([*base, node.module] if node.module else base)
    else:
        module = node.module or ""
    return [f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module for alias in node.names]


def _run_time_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, wherever it stands (in a function too); not those under
    ``if TYPE_CHECKING:``, which only the type checker follows."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """Which of the package's modules each module imports, wherever the import statement stands (for the type
    checker alone excepted)."""
    modules = modules_of(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        own_package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _run_time_imports(ast.parse(path.read_text(encoding="utf-8"))):
            for imported in _imported(node, own_package, modules):
                target = imported
                while target not in modules and "." in target:  # a name defined in a module: that module
                    target = target.rpartition(".")[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or around a circle (Tarjan's strongly connected
    components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_the_package_imports_back_into_itself() -> None:
    assert circles(import_graph(PACKAGE)) == []


def test_a_circle_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text("from .b import thing\n")
    (package / "sub" / "b.py").write_text("def thing():\n    from . import a\n    return a\n")
    (package / "c.py").write_text("from .sub import a\nimport pkg.sub.b\nif TYPE_CHECKING:\n    from . import d\n")
    (package / "d.py").write_text("from . import c\n")
    assert circles(import_graph(package)) == [["pkg.sub.a", "pkg.sub.b"]]
    assert import_graph(package)["pkg.c"] == {"pkg.sub.a", "pkg.sub.b"}  # pkg.d only for the type checker


@pytest.mark.parametrize("module", sorted(modules_of(PACKAGE)))
def test_each_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", f"import {module}"],
        capture_output=True,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
