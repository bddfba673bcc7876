"""tools/check_dist.py, the check of what people install (CI runs the whole of it): how it compares the archives
and what it reads from the README."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest
from tools.check_dist import (
    DistError,
    missing_files,
    readme_library_program,
    readme_prompt_command,
    sdist_files,
    wheel_differences,
    wheel_files,
)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = [
    "tinyacp/__init__.py",
    "tinyacp/py.typed",
    "tinyacp/_view_assets/view.css",
    "tinyacp/_view_assets/view.js",
    "tinyacp/cli/agents/agents.json",
]


def test_two_wheels_with_the_same_files_and_bytes_have_no_difference() -> None:
    files = {"tinyacp/__init__.py": "a1", "tinyacp/py.typed": "e3"}
    assert wheel_differences(files, dict(files)) == []


def test_a_file_missing_from_either_wheel_or_differing_is_named() -> None:
    built = {"tinyacp/__init__.py": "a1", "tinyacp/py.typed": "e3", "tinyacp/cli/agents.json": "77"}
    from_sdist = {"tinyacp/__init__.py": "a2", "tinyacp/py.typed": "e3", "tinyacp/stray.txt": "00"}
    assert wheel_differences(built, from_sdist) == [
        "only in the wheel from the repository: tinyacp/cli/agents.json",
        "only in the wheel from the sdist: tinyacp/stray.txt",
        "differs between the two wheels: tinyacp/__init__.py",
    ]


def test_archives_holding_every_file_of_the_package_lack_nothing() -> None:
    assert missing_files(PACKAGE, PACKAGE, [f"src/{name}" for name in PACKAGE] + ["README.md"]) == []


def test_the_agent_table_is_found_wherever_it_sits_in_the_package() -> None:
    for where in ("tinyacp/agents.json", "tinyacp/cli/agents.json", "tinyacp/cli/agents/agents.json"):
        files = [*PACKAGE[:-1], where]
        assert missing_files(files, files, [f"src/{name}" for name in files]) == []


def test_package_data_left_out_of_an_archive_is_named_with_the_archive() -> None:
    wheel = [name for name in PACKAGE if not name.endswith(".js")]
    sdist = [f"src/{name}" for name in PACKAGE if name != "tinyacp/py.typed"]
    assert missing_files(PACKAGE, wheel, sdist) == [
        "not in the wheel: tinyacp/_view_assets/view.js",
        "not in the sdist: src/tinyacp/py.typed",
    ]


def test_package_data_that_is_gone_from_the_package_is_named() -> None:
    files = [name for name in PACKAGE if not name.endswith("agents.json")]
    assert missing_files(files, files, [f"src/{name}" for name in files]) == [
        "no file of the package matches 'agents.json'"
    ]


def test_the_files_of_the_archives_are_read_with_their_bytes(tmp_path: Path) -> None:
    wheel = tmp_path / "tinyacp-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("tinyacp/py.typed", b"")
        archive.writestr("tinyacp/_view_assets/", b"")  # a directory entry is no file
        archive.writestr("tinyacp/__init__.py", b"x = 1\n")
    assert wheel_files(wheel) == {
        "tinyacp/py.typed": hashlib.sha256(b"").hexdigest(),
        "tinyacp/__init__.py": hashlib.sha256(b"x = 1\n").hexdigest(),
    }

    sdist = tmp_path / "tinyacp-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name in ("tinyacp-1.0/src/tinyacp/py.typed", "tinyacp-1.0/PKG-INFO"):
            archive.addfile(tarfile.TarInfo(name), io.BytesIO(b""))
        directory = tarfile.TarInfo("tinyacp-1.0/src")
        directory.type = tarfile.DIRTYPE
        archive.addfile(directory)
    assert sdist_files(sdist) == {"src/tinyacp/py.typed", "PKG-INFO"}


def test_the_readmes_main_command_is_its_prompt_to_the_demo_agent() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_prompt_command(readme) == ["tinyacp", "prompt", "--allow-kind", "read", "What is in this folder?"]


def test_the_readmes_library_program_is_its_ten_lines_with_a_journal() -> None:
    program = readme_library_program((ROOT / "README.md").read_text(encoding="utf-8"))
    compile(program, "README.md", "exec")
    assert "tinyacp.JsonlJournal(" in program
    assert "tinyacp.Client(options)" in program


def test_a_readme_without_the_sections_is_a_clear_error() -> None:
    with pytest.raises(DistError, match="no section '## Set-up'"):
        readme_prompt_command("# tinyacp\n\nNothing here.\n")
    with pytest.raises(DistError, match=r"no `\.venv/bin/tinyacp prompt` command"):
        readme_prompt_command("# t\n\n## Set-up\n\n```sh\n# .venv/bin/tinyacp prompt hi\npip install tinyacp\n```\n")
    with pytest.raises(DistError, match="has no python block"):
        readme_library_program("# t\n\n## The library in ten lines\n\n```sh\nls\n```\n\n## Next\n")
