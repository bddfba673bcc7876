"""RELIABILITY.md against the tests: the fault table is the one rendered from the matrix, and every test it names
exists.

The table between the markers in RELIABILITY.md is generated from ``FAULTS`` in ``tests/test_faults.py``; run
``python tests/test_reliability_doc.py`` (with tinyacp importable) to write it again after changing a row.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from test_faults import FAULTS, SUPERVISED, Fault

TESTS = Path(__file__).resolve().parent
DOCUMENT = TESTS.parent / "RELIABILITY.md"
BEGIN = "<!-- fault table: generated from tests/test_faults.py by `python tests/test_reliability_doc.py` -->"
END = "<!-- end of the fault table -->"
# A test named in the document: ``tests/test_x.py::test_name`` or ``tests/test_x.py::test_name[params]``.
NAMED_TEST = re.compile(r"tests/(test_\w+\.py)::(\w+)(?:\[([^\]]+)\])?")
KINDS = ("sync", "async")


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(rows: Iterable[Fault]) -> str:
    """The fault table: one section per area, one line per row."""
    rows = list(rows)
    lines: list[str] = []
    for area in dict.fromkeys(row.area for row in rows):
        lines += [
            f"#### {area}",
            "",
            "| Fault | Promised outcome | Row | Also supervised |",
            "| --- | --- | --- | --- |",
        ]
        for row in rows:
            if row.area == area:
                supervised = "yes" if row.supervised else ""
                lines.append(f"| {cell(row.fault)} | {cell(row.outcome)} | `{row.id}` | {supervised} |")
        lines.append("")
    return "\n".join(lines)


def table_in(document: str) -> str:
    start = document.index(BEGIN) + len(BEGIN)
    return document[start : document.index(END, start)].strip("\n")


def with_table(document: str, table: str) -> str:
    start = document.index(BEGIN) + len(BEGIN)
    return document[:start] + "\n" + table + "\n" + document[document.index(END, start) :]


def defined_tests(file: str) -> set[str]:
    """The names of the test functions a test module defines (read, not imported)."""
    tree = ast.parse((TESTS / file).read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
    }


def test_the_fault_table_is_the_one_rendered_from_the_matrix() -> None:
    table = table_in(DOCUMENT.read_text(encoding="utf-8"))
    assert table == render(FAULTS).strip("\n"), (
        "RELIABILITY.md's fault table differs from tests/test_faults.py: run `python tests/test_reliability_doc.py`"
    )


def test_every_fault_row_is_in_the_document_once() -> None:
    document = DOCUMENT.read_text(encoding="utf-8")
    for row in FAULTS:
        assert table_in(document).count(f"| `{row.id}` |") == 1, f"row {row.id} is not in RELIABILITY.md once"
    assert len({row.id for row in FAULTS}) == len(FAULTS), "two rows share an id"


def test_every_test_the_document_names_exists() -> None:
    named = NAMED_TEST.findall(DOCUMENT.read_text(encoding="utf-8"))
    assert len(named) >= 10, "the document names the tests that prove its promises"
    rows = {row.id for row in FAULTS}
    supervised = {row.id for row in SUPERVISED}
    for file, name, params in named:
        assert (TESTS / file).exists(), f"RELIABILITY.md names tests/{file}, which does not exist"
        assert name in defined_tests(file), f"RELIABILITY.md names {file}::{name}, which does not exist"
        if name in ("test_fault_matrix", "test_fault_matrix_supervised") and params:
            kind, _, row = params.partition("-")
            assert kind in KINDS, f"{name}[{params}]: the test id starts with sync- or async-"
            assert row in (rows if name == "test_fault_matrix" else supervised), f"{name}[{params}] is not a row"


def main() -> None:
    """Write the fault table into RELIABILITY.md again."""
    document = DOCUMENT.read_text(encoding="utf-8")
    DOCUMENT.write_text(with_table(document, render(FAULTS).strip("\n")), encoding="utf-8")
    print(f"wrote the fault table ({len(FAULTS)} rows) into {DOCUMENT.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
