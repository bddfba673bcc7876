"""CONTRIBUTING.md stays true: every file its map of the code names exists, every module of the package is named in
it, under its own package's heading; and a test module imports no other test module (helpers are in
``tests/helpers/``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "tinyacp"
SUB_PACKAGES = {
    f"{init.parent.relative_to(PACKAGE).as_posix()}/": init.parent
    for init in sorted(PACKAGE.rglob("__init__.py"))
    if init.parent != PACKAGE
}
"""Every sub-package, by the heading that opens it in the map (``cli/run/`` for ``src/tinyacp/cli/run``)."""


def code_map(text: str) -> dict[Path, list[str]]:
    """The ``## Code`` section's file names, by the directory they are in: a heading ``**`cli/`**`` opens a
    sub-package; a name with a slash is a path from the repository's root."""
    section = text.split("\n## Code\n", 1)[1].split("\n## ", 1)[0]
    named: dict[Path, list[str]] = {}
    directory = PACKAGE
    for line in section.splitlines():
        heading = re.fullmatch(r"\*\*`?([^*`]+)`?\*\*.*", line)
        if heading is not None:
            directory = SUB_PACKAGES.get(heading.group(1), PACKAGE)
            continue
        for name in re.findall(r"`([\w/.]+\.py)`", line):
            where = ROOT if "/" in name else directory
            named.setdefault(where, []).append(name)
    return named


def test_every_file_the_map_names_exists() -> None:
    named = code_map((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"))
    missing = [str(where / name) for where, names in named.items() for name in names if not (where / name).is_file()]
    assert missing == []


def test_every_module_of_the_package_is_on_the_map() -> None:
    named = code_map((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"))
    on_the_map = {where / name for where, names in named.items() for name in names}
    modules = {path for directory in (PACKAGE, *SUB_PACKAGES.values()) for path in directory.glob("*.py")}
    missing = sorted(str(path.relative_to(ROOT)) for path in modules - on_the_map)
    assert missing == [], "a new module: say what it holds in the map of CONTRIBUTING.md (## Code), in its group"


def test_the_map_reads_a_sub_package_heading_and_a_path_from_the_root() -> None:
    text = "intro\n## Code\n`tests/conftest.py` and `_client.py`\n**`cli/`**\n- `_run.py`\n## Next\n`_x.py`\n"
    assert code_map(text) == {ROOT: ["tests/conftest.py"], PACKAGE: ["_client.py"], PACKAGE / "cli": ["_run.py"]}


# Renders the fault matrix of test_faults.py into RELIABILITY.md: reading that module is what it tests.
READS_ANOTHER_TEST_MODULE = {"test_reliability_doc.py": {"test_faults"}}


def test_no_test_module_imports_another() -> None:
    found = {}
    for path in sorted((ROOT / "tests").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        tests = {name for name in imported if name.startswith("test_") or name == "conftest"}
        tests -= READS_ANOTHER_TEST_MODULE.get(path.name, set())
        if tests:
            found[path.name] = sorted(tests)
    assert found == {}, "move what they share into tests/helpers/"
