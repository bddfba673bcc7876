"""Reading what a batch left: its records, a journal's epochs, the processes still running."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import tinyacp
from tinyacp.batch import TurnRecord, read_results


def records(out: Path) -> list[TurnRecord]:
    return list(read_results(out / "results.jsonl"))


def epochs(journal: str | Path) -> list[int]:
    return [record["epoch"] for record in tinyacp.JsonlJournal.read(journal) if record["type"] == "epoch"]


def live_processes() -> Iterator[tuple[int, list[bytes]]]:
    """Every live (not zombie) process: its pid and the fields of /proc/PID/stat after the command name."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            yield int(entry), fields


def processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory`` (every agent of these tests runs there)."""
    found = []
    for pid, _ in live_processes():
        try:
            if os.readlink(f"/proc/{pid}/cwd") == str(directory):
                found.append(pid)
        except OSError:
            continue
    return found
