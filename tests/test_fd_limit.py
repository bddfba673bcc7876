"""Many clients in one process: when the soft open-files limit runs out, it is raised, or the error says what to do.

The limit is the process's, so each case runs in a Python process of its own that lowers its limits first,
starts clients (whose agent is ``cat``, which ends at the EOF ``close()`` gives it) and reports in JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import TESTS, wait_for
from tinyacp._fd_limit import FDS_PER_CLIENT
from tinyacp._process import _live_group_members

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is a POSIX limit")

CHILD = r"""
import errno, json, resource, sys
import tinyacp
from tinyacp._process import _live_group_members

soft, hard, wanted = (int(arg) for arg in sys.argv[1:4])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
options = tinyacp.Options(command=["cat"], observer=tinyacp.BaseObserver())
clients, error = [], None
try:
    for _ in range(wanted):
        clients.append(tinyacp.Client(options))
except tinyacp.SpawnError as exc:
    cause = exc.__cause__
    error = {"text": str(exc), "emfile": isinstance(cause, OSError) and cause.errno == errno.EMFILE}
pids = [client.pid for client in clients]
for client in clients:
    client.close()
left = [pid for pid in pids if _live_group_members(pid)]
again = tinyacp.Client(options)  # the failed start left nothing behind: one more fits at once
again.close()
print(json.dumps({
    "started": len(clients),
    "error": error,
    "limit": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
    "left": left,
}))
"""


def run_child(soft: int, hard: int, wanted: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(soft), str(hard), str(wanted)],
        cwd=TESTS,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_soft_limit_is_raised_to_the_hard_limit_when_clients_run_out_of_fds() -> None:
    report = run_child(soft=32, hard=1024, wanted=60)  # 60 clients hold about 300 fds
    assert report["error"] is None
    assert report["started"] == 60
    assert report["limit"] == [1024, 1024]
    assert report["left"] == []


def test_out_of_fds_at_the_hard_limit_fails_with_an_error_that_says_what_to_do() -> None:
    report = run_child(soft=48, hard=48, wanted=60)
    error = report["error"]
    assert error is not None
    assert error["emfile"]
    assert 0 < report["started"] < 10
    text = error["text"]
    assert "too many open files" in text
    assert "RLIMIT_NOFILE" in text
    assert "hard limit is 48" in text
    assert "each running client holds 5" in text
    assert "Close the clients you are done with" in text
    assert report["limit"] == [48, 48]
    assert report["left"] == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts the open fds in /proc/self/fd")
def test_a_running_client_holds_the_documented_number_of_fds_and_gives_them_back() -> None:
    before = len(os.listdir("/proc/self/fd"))
    client = tinyacp.Client(tinyacp.Options(command=["cat"], observer=tinyacp.BaseObserver()))
    try:
        held = len(os.listdir("/proc/self/fd")) - before
        expected = FDS_PER_CLIENT - (client._proc.exit_fd is None)  # no pidfd before Linux 5.3
    finally:
        client.close()
    wait_for(lambda: not _live_group_members(client.pid), what="the agent's group to end")
    assert held == expected
    assert len(os.listdir("/proc/self/fd")) == before
