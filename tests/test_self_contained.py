"""The repository carries everything its tests need: a copy of it, alone in an empty directory, collects the
whole suite and runs the core layer."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TESTS, pytest_child_env

ROOT = TESTS.parent
LEFT_OUT = shutil.ignore_patterns(".git", ".venv", "*cache*", "__pycache__", "*.egg-info", "site", "build", "dist")


def repository_files() -> list[Path]:
    """The files a clone has: git's list when this is a checkout, else the tree without caches."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        return []
    return [Path(os.fsdecode(name)) for name in listed.stdout.split(b"\0") if name]


def copy_repository(target: Path) -> None:
    files = repository_files() if shutil.which("git") else []
    if not files:
        shutil.copytree(ROOT, target, ignore=LEFT_OUT)
        return
    for name in files:
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


@pytest.mark.slow
def test_a_copy_alone_in_an_empty_directory_collects_the_suite_and_passes_the_core_layer(tmp_path: Path) -> None:
    copy = tmp_path / "alone" / "repo"
    copy_repository(copy)
    assert sorted(p.name for p in copy.parent.iterdir()) == ["repo"]
    env = pytest_child_env(PYTHONPATH=str(copy / "src"))
    # One run: collecting the whole suite is the first half of selecting the core layer from it (a collection
    # error anywhere fails the run); the tests outside the layer are counted as deselected.
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-m", "core", "-x"]
    core = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert core.returncode == 0, core.stdout[-3000:] + core.stderr[-3000:]
    summary = core.stdout.strip().splitlines()[-1]
    assert re.search(r"\b[1-9]\d* passed\b", summary) and re.search(r"\b[1-9]\d* deselected\b", summary), summary
