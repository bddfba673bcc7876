"""The documentation: the site builds strictly with every module of the API in its reference, no Sphinx role is
left raw on a page, and docstrings shown by ``--help`` name objects plainly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TESTS

ROOT = TESTS.parent
RAW_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|exc|data|obj|const):(?:`|<code>)")


@pytest.mark.slow
def test_the_site_builds_strictly_with_batch_and_replay_in_the_reference_and_no_raw_role(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extras (pip install -e '.[docs]') build the site")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    pages = sorted(site.rglob("*.html"))
    assert pages
    raw = {str(page.relative_to(site)): RAW_ROLE.findall(page.read_text(encoding="utf-8")) for page in pages}
    assert {page: found for page, found in raw.items() if found} == {}
    reference = (site / "reference" / "index.html").read_text(encoding="utf-8")
    for anchor in ("tinyacp.Client", "tinyacp.reader", "tinyacp.batch.run_batch", "tinyacp.replay.load_recording"):
        assert f'id="{anchor}"' in reference, anchor
    # A role became a link to what it names.
    assert 'href="#tinyacp.JsonlJournal"' in reference


def test_replay_help_names_objects_plainly() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    shown = subprocess.run(
        [sys.executable, "-m", "tinyacp", "replay", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "written by JsonlJournal." in " ".join(shown.stdout.split())
    assert not RAW_ROLE.search(shown.stdout.replace("``", "`")) and ":class:" not in shown.stdout


def test_plain_shows_the_name_each_role_shows() -> None:
    from tinyacp._roles import plain

    text = "See :class:`~tinyacp.Client`, :meth:`AsyncClient.prompt` and :py:func:`tinyacp.batch.run_batch`."
    assert plain(text) == "See Client, AsyncClient.prompt and tinyacp.batch.run_batch."
