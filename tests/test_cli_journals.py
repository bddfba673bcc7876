"""The journals of your runs without their paths: ``tinyacp journals`` lists them and ``--prune`` removes old
ones (never anything outside the journal directory), ``tinyacp show last`` and ``show SESSION_ID`` find one, and
``tinyacp sessions --limit N`` shows the N most recent."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from helpers.cli import Cli

DAY = 86400


def two_runs(cli: Cli) -> list[dict[str, str]]:
    """Two runs of the demo agent, each with its default journal; their sessions, most recent first."""
    for prompt in ("first", "second"):
        assert cli.run("prompt", "-y", prompt).returncode == 0
    listed = cli.run("sessions", "--format", "json")
    assert listed.returncode == 0
    sessions: list[dict[str, str]] = json.loads(listed.stdout)["sessions"]
    assert len(sessions) == 2 and all(session["journal"] for session in sessions)
    return sessions


def test_show_last_and_show_a_session_id_find_the_journal(cli: Cli) -> None:
    latest, earlier = two_runs(cli)
    last = cli.run("show", "last")
    assert last.returncode == 0, last.stderr
    assert f"showing the latest journal: {latest['journal']}" in last.stderr.decode()
    assert b"second" in last.stdout and b"first" not in last.stdout

    by_session = cli.run("show", earlier["session_id"])
    assert by_session.returncode == 0, by_session.stderr
    assert f"the latest journal of session {earlier['session_id']}: {earlier['journal']}" in by_session.stderr.decode()
    assert b"first" in by_session.stdout and b"second" not in by_session.stdout

    unknown = cli.run("show", "no-such-session")
    assert unknown.returncode == 2 and unknown.stdout == b""
    assert b"no such file, and no session this machine ran with that id has a journal" in unknown.stderr


def test_show_last_before_any_run_says_there_is_no_journal_yet(cli: Cli) -> None:
    done = cli.run("show", "last")
    assert done.returncode == 2
    assert b"no journal yet" in done.stderr


def test_sessions_limit_shows_the_most_recent_ones(cli: Cli) -> None:
    latest, _ = two_runs(cli)
    limited = cli.run("sessions", "--limit", "1", "--format", "json")
    assert [session["session_id"] for session in json.loads(limited.stdout)["sessions"]] == [latest["session_id"]]
    text = cli.run("sessions", "--limit", "1").stdout.decode()
    assert latest["session_id"] in text and text.count("journal: ") == 1
    assert cli.run("sessions", "--limit", "0").returncode == 2


def test_journals_lists_size_age_agent_and_session_newest_first(cli: Cli) -> None:
    latest, earlier = two_runs(cli)
    done = cli.run("journals")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.decode().splitlines()
    assert header.startswith("2 journal(s), ") and header.endswith("(newest first):")
    for row, session in zip(rows, (latest, earlier), strict=True):
        assert Path(session["journal"]).name in row and session["session_id"] in row and " demo " in row
        assert "ago" in row and "KiB" in row
    listed = json.loads(cli.run("journals", "--format", "json").stdout)
    assert [item["session_id"] for item in listed] == [latest["session_id"], earlier["session_id"]]
    assert [item["size"] for item in listed] == [Path(s["journal"]).stat().st_size for s in (latest, earlier)]


def test_prune_removes_old_journals_only_inside_the_journal_directory_and_says_what_it_freed(cli: Cli) -> None:
    latest, earlier = two_runs(cli)
    old = Path(earlier["journal"])
    directory = old.parent
    outside = cli.tmp / "precious.jsonl"
    outside.write_text("not a journal of ours\n")
    (directory / "link.jsonl").symlink_to(outside)
    (directory / "folder.jsonl").mkdir()
    long_ago = time.time() - 40 * DAY
    for path in (old, outside, directory / "folder.jsonl"):
        os.utime(path, (long_ago, long_ago))
    os.utime(directory / "link.jsonl", (long_ago, long_ago), follow_symlinks=False)
    size = old.stat().st_size

    dry = cli.run("journals", "--prune", "--older-than", "30d", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.decode().startswith("would remove 1 journal(s) older than 30d, freeing ")
    assert old.exists()

    done = cli.run("journals", "--prune", "--older-than", "30d")
    assert done.returncode == 0, done.stderr
    said = done.stdout.decode()
    assert said.startswith(f"removed 1 journal(s) older than 30d, freeing {size / 1024:.1f} KiB, in {directory}")
    assert "left alone (not regular journal files): folder.jsonl, link.jsonl" in said
    assert not old.exists() and Path(latest["journal"]).exists()
    assert outside.read_text() == "not a journal of ours\n"
    assert (directory / "link.jsonl").is_symlink() and (directory / "folder.jsonl").is_dir()
    shown = cli.run("show", earlier["session_id"])
    assert shown.returncode == 2
    assert f"the journal of session {earlier['session_id']} is gone (pruned or moved)" in shown.stderr.decode()


@pytest.mark.parametrize("args", [["--prune"], ["--older-than", "30d"], ["--prune", "--older-than", "soon"]])
def test_prune_needs_an_age_it_can_read(cli: Cli, args: list[str]) -> None:
    done = cli.run("journals", *args)
    assert done.returncode == 2
    assert b"tinyacp: error: " in done.stderr
