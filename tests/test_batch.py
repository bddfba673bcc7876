"""tinyacp.batch with the local engine, and the ``tinyacp batch`` command: every id gets exactly one record,
failures are records, no agent process is left, journals hold one epoch per attempt, and a batch killed
mid-way finishes on the next run."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import AGENTS, chunk, handshake, wait_for
from helpers.batch import epochs, live_processes, processes_in, records
from tinyacp.batch import TurnRecord, arun_turn, run_batch, run_turn
from tinyacp.batch._results import ResultsFile

ALLOW = tinyacp.PermissionPolicy(allow_all=True)


def write_items(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def session_members(sid: int) -> list[int]:
    """Live processes of the session ``sid``."""
    return [pid for pid, fields in live_processes() if int(fields[3]) == sid]


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """The agents' working directory; no process may be left in it after the test."""
    directory = tmp_path / "work"
    directory.mkdir()
    (directory / "notes.txt").write_text("hello\n", encoding="utf-8")
    yield directory
    wait_for(lambda: not processes_in(directory), timeout=30, what="the agents to be gone")


def dying_agent(tmp_path: Path) -> list[str]:
    """An agent that answers initialize and session/new, sends one update of the turn and exits with 3."""
    script = tmp_path / "dying.json"
    steps = [*handshake(), {"op": "update", "session": "s1", "update": chunk("half")}, {"op": "exit", "code": 3}]
    script.write_text(json.dumps(steps), encoding="utf-8")
    return [sys.executable, str(AGENTS / "scripted.py"), str(script)]


def test_import_tinyacp_loads_neither_ray_nor_the_batch_package() -> None:
    code = (
        "import sys, tinyacp; "
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith(('ray.', 'tinyacp.batch'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"


def test_a_record_counts_the_notices_the_limits_left_out(tmp_path: Path, work: Path) -> None:
    items: list[dict[str, Any]] = [{"id": "notice", "prompt": "with-notice hello"}, {"id": "plain", "prompt": "hi"}]
    kept, cut = tmp_path / "kept", tmp_path / "cut"
    run_batch(items, kept, agent="demo", cwd=work, policy=ALLOW, timeout=60)
    limits = tinyacp.TransferLimits(max_notice_bytes=1)
    run_batch(items, cut, agent="demo", cwd=work, policy=ALLOW, timeout=60, transfer_limits=limits)

    whole = {record.id: record for record in records(kept)}
    assert [notice["title"] for notice in whole["notice"].notices] == ["Model fallback"]
    assert (whole["notice"].notices_dropped, whole["plain"].notices_dropped) == (0, 0)
    left_out = {record.id: record for record in records(cut)}
    assert left_out["notice"].ok and left_out["notice"].notices == [] and left_out["notice"].notices_dropped == 1
    lines = [json.loads(line) for line in (cut / "results.jsonl").read_text().splitlines()]
    assert {line["id"]: line["notices_dropped"] for line in lines} == {"notice": 1, "plain": 0}


def test_every_item_gets_exactly_one_record_whatever_the_agent_does(tmp_path: Path, work: Path) -> None:
    items: list[dict[str, Any]] = [
        {"id": "ok-1", "prompt": "hello"},
        {"id": 2, "prompt": "two", "agent": "demo --chunks 2"},
        {"id": "false", "prompt": "x", "agent": "false"},
        {"id": "missing", "prompt": "x", "agent": "no-such-program-tinyacp-test"},
        {"id": "dies", "prompt": "x", "agent": dying_agent(tmp_path)},
        {"id": "../escape/../x", "prompt": "weird id"},
    ]
    out = tmp_path / "out"
    summary = run_batch(items, out, agent="demo", cwd=work, policy=ALLOW, timeout=60, concurrency=3)

    got = {record.id: record for record in records(out)}
    assert len(records(out)) == len(items)
    assert set(got) == {item["id"] for item in items}
    assert got["ok-1"].ok and got["ok-1"].stop_reason == "end_turn" and "You said: hello" in got["ok-1"].text
    assert got["ok-1"].permissions == tinyacp.batch.PermissionCounts(allowed=1, rejected=0)
    assert got[2].ok and got[2].agent == "demo"
    assert got["false"].error is not None and got["false"].error.type == "AgentExited"
    assert got["missing"].error is not None and got["missing"].error.type == "SpawnError"
    assert got["dies"].error is not None and got["dies"].error.type == "AgentExited"
    assert "exit code 3" in got["dies"].error.message and got["dies"].updates == 1
    assert (summary.ok, summary.failed, summary.missing, summary.ran) == (3, 3, 0, 6)
    assert not summary.all_ok
    assert summary.agents["demo"].ok == 3 and summary.agents["false"].failed == 1

    journals = out / "journals"
    assert sorted(path.parent for path in journals.iterdir()) == [journals] * len(items)
    for record in got.values():
        assert Path(record.journal).parent == journals
        assert epochs(record.journal) == [1] and record.epoch == 1 and record.attempt == 1
    sent = [r for r in tinyacp.JsonlJournal.read(got["ok-1"].journal) if r.get("method") == "session/prompt"]
    assert len(sent) == 2  # the prompt request out and its response in: the journal is complete
    assert not (tmp_path / "escape").exists()


def test_a_second_run_skips_recorded_ids_and_retry_failed_runs_the_failed_ones_as_new_epochs(
    tmp_path: Path, work: Path
) -> None:
    items = write_items(
        tmp_path / "items.jsonl",
        [{"id": "good", "prompt": "a"}, {"id": "bad", "prompt": "b", "agent": "false"}],
    )
    out = tmp_path / "out"
    run_batch(items, out, agent="demo", cwd=work, policy=ALLOW)
    again = run_batch(items, out, agent="demo", cwd=work, policy=ALLOW)
    assert (again.ran, again.skipped, again.failed) == (0, 2, 1)
    retried = run_batch(items, out, agent="demo", cwd=work, policy=ALLOW, retry_failed=True)
    assert (retried.ran, retried.skipped) == (1, 1)
    bad = [record for record in records(out) if record.id == "bad"]
    assert [(record.attempt, record.epoch) for record in bad] == [(1, 1), (2, 2)]
    assert epochs(bad[-1].journal) == [1, 2]


def test_retries_run_a_failed_turn_again_in_new_epochs_and_write_only_the_last_record(
    tmp_path: Path, work: Path
) -> None:
    out = tmp_path / "out"
    summary = run_batch([{"id": "f", "prompt": "x"}], out, agent="false", cwd=work, retries=2)
    [record] = records(out)
    assert (record.attempt, record.epoch, record.ok) == (3, 3, False)
    assert epochs(record.journal) == [1, 2, 3]
    assert summary.failed == 1


def test_a_turn_past_its_timeout_is_a_failed_record(tmp_path: Path, work: Path) -> None:
    out = tmp_path / "out"
    run_batch([{"id": "slow", "prompt": "x", "timeout": 0.5}], out, agent="demo --delay 2", cwd=work, policy=ALLOW)
    [record] = records(out)
    assert not record.ok and record.error is not None and record.error.type == "AgentTimeout"


def test_items_are_read_lazily_and_at_most_concurrency_turns_are_in_flight(tmp_path: Path, work: Path) -> None:
    pulled = 0
    written = 0
    most_running = 0

    def items() -> Iterator[dict[str, Any]]:
        nonlocal pulled
        for number in range(8):
            pulled += 1
            yield {"id": number, "prompt": "p"}

    def on_record(record: TurnRecord) -> None:
        nonlocal written
        assert pulled - written <= 2  # only the turns in flight were read ahead
        written += 1

    def on_progress(progress: tinyacp.batch.BatchProgress) -> None:
        nonlocal most_running
        most_running = max(most_running, progress.running)

    summary = run_batch(
        items(), tmp_path / "out", agent="demo", cwd=work, concurrency=2, on_record=on_record, on_progress=on_progress
    )
    assert summary.ran == 8 and written == 8 and most_running == 2


def test_a_torn_tail_of_the_results_is_sealed_and_the_ids_before_it_are_kept(tmp_path: Path, work: Path) -> None:
    out = tmp_path / "out"
    run_batch([{"id": "a", "prompt": "x"}], out, agent="demo", cwd=work)
    results = out / "results.jsonl"
    with open(results, "ab") as file:
        file.write(b'{"id":"b","ok":tr')  # a crash in the middle of a write
    summary = run_batch([{"id": "a", "prompt": "x"}, {"id": "b", "prompt": "y"}], out, agent="demo", cwd=work)
    assert (summary.skipped, summary.ran, summary.ok) == (1, 1, 2)
    assert [record.id for record in records(out)] == ["a", "b"]
    assert results.read_bytes().count(b'{"id":"b","ok":tr\n') == 1


def test_a_second_writer_of_the_same_output_directory_is_refused(tmp_path: Path, work: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with ResultsFile(out / "results.jsonl"), pytest.raises(tinyacp.BatchBusy):
        run_batch([{"id": "a", "prompt": "x"}], out, agent="demo", cwd=work)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}', "more than once"),
        ('{"id": "a"}', "prompt"),
        ('{"id": "a", "prompt": "x", "timeout": "soon"}', "timeout"),
        ("[1, 2]", "JSON object"),
        ("{not json", "not a JSON object"),
        ('{"id": "a", "prompt": "x", "set": {"effort": 3}}', "set"),
    ],
)
def test_a_malformed_file_stops_the_batch_before_any_agent_starts(
    tmp_path: Path, work: Path, line: str, message: str
) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "first", "prompt": "x"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(tinyacp.BatchItemError, match=message):
        run_batch(items, tmp_path / "out", agent="demo", cwd=work)
    assert records(tmp_path / "out") == []


def test_a_malformed_item_from_an_iterable_stops_new_turns_and_keeps_the_records_of_those_in_flight(
    tmp_path: Path, work: Path
) -> None:
    items: list[Any] = [{"id": "a", "prompt": "x"}, {"id": "b"}, {"id": "c", "prompt": "x"}]
    with pytest.raises(tinyacp.BatchItemError, match="prompt"):
        run_batch(items, tmp_path / "out", agent="demo", cwd=work, concurrency=1)
    assert [record.id for record in records(tmp_path / "out")] == ["a"]


def test_an_items_mode_model_options_and_meta_go_to_the_agent_and_its_usage_comes_back(
    tmp_path: Path, work: Path
) -> None:
    out = tmp_path / "out"
    items: list[dict[str, Any]] = [
        {"id": "meta", "prompt": "all-kinds", "meta": {"trace": "t-1"}},
        {"id": "offered", "prompt": "x", "mode": "auto", "model": "demo-large", "set": {"mode": "default"}},
    ]
    run_batch(items, out, agent="demo", cwd=work, policy=ALLOW)
    got = {record.id: record for record in records(out)}
    assert got["meta"].ok
    assert got["meta"].usage == {
        "context_used": len("all-kinds"),
        "context_size": 200000,
        "cost": {"amount": 0, "currency": "USD"},
    }
    [sent] = [r for r in tinyacp.JsonlJournal.read(got["meta"].journal) if r.get("method") == "session/prompt"][:1]
    assert json.loads(sent["line"])["params"]["_meta"] == {"trace": "t-1"}
    assert got["offered"].ok
    sent_methods = [r.get("method") for r in tinyacp.JsonlJournal.read(got["offered"].journal)]
    assert {"session/set_mode", "session/set_config_option"} <= set(sent_methods)
    # One turn is not checked ahead (a batch is): the demo agent offers none of these, refused before it is sent.
    for key, field in (("mode", {"mode": "plan"}), ("model", {"model": "big"}), ("set", {"set": {"effort": "high"}})):
        record = run_turn({"id": key, "prompt": "x", **field}, tmp_path / "one", agent="demo", cwd=work)
        assert not record.ok and record.error is not None and record.error.type == "NotAdvertised", key


def test_the_preflight_leaves_an_agent_the_ray_driver_cannot_start_to_the_turns(work: Path) -> None:
    from tinyacp.batch._items import parse_item
    from tinyacp.batch._preflight import Preflight
    from tinyacp.batch._turn import TurnSettings

    settings = TurnSettings.from_options({"agent": "no-such-program-tinyacp-test", "cwd": work})
    item = parse_item({"id": "x", "prompt": "hi", "mode": "plan"})
    on_ray = Preflight(settings, elsewhere=True)
    on_ray.note(item, None)
    on_ray.check()  # the nodes may have the agent the driver lacks
    local = Preflight(settings)
    local.note(item, None)
    with pytest.raises(tinyacp.BatchItemError, match="SpawnError"):
        local.check()


def test_run_turn_returns_a_record_and_each_call_is_a_new_epoch(tmp_path: Path, work: Path) -> None:
    first = run_turn({"id": "t", "prompt": "hi"}, tmp_path / "j", agent="demo", cwd=work, policy=ALLOW)
    second = run_turn({"id": "t", "prompt": "hi"}, tmp_path / "j", agent="demo", cwd=work, attempt=2)
    assert first.ok and (first.epoch, second.epoch, second.attempt) == (1, 2, 2)
    assert second.permissions.rejected == 1  # the default policy allows nothing, and nobody is asked
    assert first.host and first.seconds > 0 and first.node is None
    assert epochs(tmp_path / "j" / "t.jsonl") == [1, 2]


def test_arun_turn_turns_a_login_or_start_failure_into_a_record(tmp_path: Path) -> None:
    import asyncio

    record = asyncio.run(arun_turn({"id": 1, "prompt": "x"}, tmp_path, agent=["no-such-program-tinyacp-test"]))
    assert not record.ok and record.error is not None and record.error.type == "SpawnError"


def test_journal_fsyncs_stay_on_the_event_loop_while_quick_and_move_to_a_thread_while_slow(tmp_path: Path) -> None:
    """A hop to a worker thread costs more CPU than a quick fsync; a slow disk must hold up only the turn that
    waits for it. The place follows the directory's recent fsync times, both ways."""
    import asyncio
    import threading

    from tinyacp.batch import _turn

    def quick() -> int:
        return threading.get_ident()

    def slow() -> int:
        time.sleep(0.03)
        return threading.get_ident()

    async def main() -> None:
        loop_thread = threading.get_ident()
        where = str(tmp_path)
        assert await _turn._synced(where, quick) == loop_thread
        places = [await _turn._synced(where, slow) for _ in range(4)]
        assert places[0] == loop_thread, "nothing says the disk is slow yet"
        assert places[-1] != loop_thread, "slow fsyncs still block the loop"
        places = [await _turn._synced(where, quick) for _ in range(20)]
        assert places[-1] == loop_thread, "quick again, but still sent to a thread"

    try:
        asyncio.run(main())
    finally:
        _turn._sync_seconds.pop(str(tmp_path), None)


_COUNT_FSYNCS = """
import os, stat, sys
real, counts = os.fsync, {"file": 0, "dir": 0}
def fsync(fd):
    counts["dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"] += 1
    real(fd)
os.fsync = fsync
from tinyacp.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write(f"{counts['file']} {counts['dir']} {code}")
"""


def test_a_batch_fsyncs_each_journal_at_its_decisions_and_every_record_with_sync_journal(
    tmp_path: Path, work: Path
) -> None:
    """By default a turn's journal is fsync'ed at its permission decision (the demo agent asks once a turn), its
    epoch with it; the journals share their directory's fsyncs. ``--sync-journal`` fsyncs every record."""
    items = write_items(tmp_path / "items.jsonl", [{"id": n, "prompt": "list the files"} for n in range(3)])
    counted = {}
    for flags in ([], ["--sync-journal"]):
        out = tmp_path / f"out{len(flags)}"
        command = ["batch", str(items), "--out", str(out), "--cwd", str(work), "--agent", "demo", "-y", "-q", *flags]
        done = subprocess.run(
            [sys.executable, "-c", _COUNT_FSYNCS, str(tmp_path / "counts"), *command],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        files, dirs, code = map(int, (tmp_path / "counts").read_text().split())
        assert code == 0
        journals = sorted((out / "journals").iterdir())
        lines = sum(len(tinyacp.JsonlJournal.read(journal)) for journal in journals)
        assert [epochs(journal) for journal in journals] == [[1]] * 3
        assert all(record.permissions.allowed == 1 for record in records(out))
        counted[bool(flags)] = (files, dirs, lines)
    files, dirs, _ = counted[False]
    assert files == 3, "one fsync per decision, none for the epoch"
    assert 1 <= dirs <= 3
    files, dirs, lines = counted[True]
    assert files == lines, "every record fsync'ed on its own"
    assert 1 <= dirs <= 3


def test_a_connection_to_the_ray_driver_without_the_batchs_secret_is_closed_and_gets_no_turn() -> None:
    """The Ray engine's driver listens for its actors' connections; anyone else who connects is turned away."""
    import socket
    from typing import cast

    from tinyacp.batch import _ray

    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    contact = _ray._Contact("127.0.0.1", listener.getsockname()[1], "s" * 32)
    slot = _ray._Slot(handle=None, node="n", capacity=1, key=1)

    class Pool:
        def __init__(self) -> None:
            self.slots = [slot]

        def live(self) -> list[_ray._Slot]:
            return self.slots

    driver = _ray._ConnectionDriver(None, cast(Any, None), cast(Any, Pool()), listener, contact)

    def answer(hello: bytes) -> str:
        with socket.create_connection(("127.0.0.1", contact.port), timeout=10) as client:
            client.sendall(hello)
            client.shutdown(socket.SHUT_WR)
            client.setblocking(False)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                driver._step()  # waits at most a second when nothing is ready
                if slot.link is not None:
                    return "taken"
                try:
                    if client.recv(1) == b"":
                        return "closed"
                except ConnectionResetError:  # closed with our bytes unread
                    return "closed"
                except BlockingIOError:
                    continue
            return "still open"

    try:
        for hello in (b'["wrong",1]\n', b"not json\n", b"x" * 5000, b'["' + b"s" * 32 + b'",2]\n'):
            assert answer(hello) == "closed", f"{hello[:20]!r} was not turned away"
        assert answer(b'["' + b"s" * 32 + b'",1]\n') == "taken"
    finally:
        driver._end()


def test_a_turn_without_an_agent_is_the_callers_mistake(tmp_path: Path) -> None:
    with pytest.raises(tinyacp.BatchItemError, match="no agent"):
        run_turn({"id": 1, "prompt": "x"}, tmp_path)


def test_resume_after_the_batch_process_is_killed_finishes_the_rest(tmp_path: Path, work: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", [{"id": f"i{n}", "prompt": f"p{n}"} for n in range(6)])
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tinyacp", "batch", str(items), "--out", str(out), "-q", "-y"]
    command += ["--agent", "demo --delay 0.1", "--concurrency", "2", "--cwd", str(work)]
    batch = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        results = out / "results.jsonl"

        def two_done_and_one_in_flight() -> bool:
            done = {record.id for record in records(out)} if results.exists() else set()
            begun = {path.stem for path in (out / "journals").glob("*.jsonl")}
            return len(done) >= 2 and bool(begun - done)

        wait_for(two_done_and_one_in_flight, timeout=60, what="two records and a turn in flight")
        os.kill(batch.pid, signal.SIGKILL)
    finally:
        batch.wait(timeout=30)
    wait_for(lambda: not session_members(batch.pid), timeout=30, what="the killed batch's agents to exit")
    before = {record.id for record in records(out)}
    assert 2 <= len(before) < 6

    summary = run_batch(items, out, agent="demo", cwd=work, policy=ALLOW)
    final = records(out)
    assert sorted(record.id for record in final) == [f"i{n}" for n in range(6)]  # one record each
    assert summary.all_ok and summary.skipped == len(before)
    interrupted = [record for record in final if record.id not in before and record.epoch == 2]
    assert interrupted, "a turn in flight at the kill left an epoch; its new attempt is the next one"
    for record in interrupted:
        assert epochs(record.journal) == [1, 2]


@pytest.mark.smoke
def test_the_command_streams_records_as_json_and_exits_1_when_a_turn_failed(tmp_path: Path, work: Path) -> None:
    items = write_items(
        tmp_path / "items.jsonl", [{"id": "good", "prompt": "a"}, {"id": "bad", "prompt": "b", "agent": "false"}]
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tinyacp", "batch", str(items), "--out", str(out), "--cwd", str(work)]
    result = subprocess.run([*command, "--format", "json"], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1, result.stderr
    streamed = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(record["id"] for record in streamed) == ["bad", "good"]
    assert "1 ok, 1 failed" in result.stderr and "false" in result.stderr

    again = subprocess.run(
        [*command, "--retry-failed", "--agent", "demo"], capture_output=True, text=True, timeout=120, check=False
    )
    assert again.returncode == 1  # the item names its own agent: `false` fails again
    fine = write_items(tmp_path / "fine.jsonl", [{"id": "x", "prompt": "a"}])
    fine_command = [*command[:4], str(fine), "--out", str(tmp_path / "o2")]
    ok = subprocess.run(fine_command, capture_output=True, text=True, timeout=120, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "demo" in ok.stdout and "1 ok, 0 failed" in ok.stdout


def test_the_command_reports_a_malformed_file_as_a_usage_error(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": 1, "prompt": "x"}\n{"id": 1, "prompt": "y"}\n', encoding="utf-8")
    command = [sys.executable, "-m", "tinyacp", "batch", str(items), "--out", str(tmp_path / "out")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "line 2" in result.stderr and "more than once" in result.stderr and "Traceback" not in result.stderr


def test_the_ray_engine_without_ray_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    shim = tmp_path / "shim" / "ray"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("No module named ray")\n', encoding="utf-8")
    items = write_items(tmp_path / "items.jsonl", [{"id": "a", "prompt": "hello"}])
    out = tmp_path / "runs-ray"
    command = [sys.executable, "-m", "tinyacp", "batch", str(items), "--out", str(out), "--engine", "ray", "-q"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shim.parent), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert result.returncode == 3 and "needs Ray" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_the_progress_line_shows_done_failed_running_rate_and_eta() -> None:
    import io

    from tinyacp.batch import BatchProgress
    from tinyacp.cli.batch._batch import ProgressLine

    stream = io.StringIO()
    line = ProgressLine(stream)
    progress = BatchProgress(to_run=10, started_at=time.monotonic() - 4.0, done=4, failed=1, running=3)
    line.update(progress)
    line.close()
    shown = stream.getvalue()
    assert "done 4/10  failed 1  running 3  1.00 turns/s  ETA 00:00:06" in shown
    assert shown.endswith("\r\x1b[K")  # the line is cleared at the end


def test_the_summary_table_has_a_row_per_agent_with_its_median_and_cost(tmp_path: Path) -> None:
    from tinyacp.batch import AgentSummary, BatchSummary
    from tinyacp.cli.batch._batch import summary_table

    summary = BatchSummary(
        ok=3, failed=1, missing=0, ran=4, skipped=2, seconds=9.0,
        agents={
            "claude": AgentSummary(ok=2, failed=0, median_seconds=4.25, cost={"USD": 0.125}),
            "demo\x1b[2J": AgentSummary(ok=1, failed=1, median_seconds=0.5, cost={}),
        },
        results=tmp_path / "results.jsonl", journals=tmp_path / "journals",
    )  # fmt: skip
    lines = summary_table(summary).splitlines()
    assert lines[0].split() == ["agent", "ok", "failed", "median", "s", "cost"]
    assert lines[1].split() == ["claude", "2", "0", "4.25", "0.1250", "USD"]
    assert "\x1b" not in lines[2] and lines[2].split()[1:] == ["1", "1", "0.50", "-"]
    assert lines[3].startswith("3 ok, 1 failed, 0 not run; this run: 4 turns, 2 skipped")


def test_the_summary_names_each_failed_item_with_its_reason_and_journal_up_to_a_bound(
    tmp_path: Path, work: Path
) -> None:
    from tinyacp.batch._plan import FAILURES_KEPT

    failing = [{"id": f"f{n}", "prompt": "x", "agent": "false"} for n in range(FAILURES_KEPT + 2)]
    items = write_items(tmp_path / "items.jsonl", [{"id": "ok", "prompt": "a"}, *failing])
    summary = run_batch(items, tmp_path / "out", agent="demo", cwd=work, policy=ALLOW, concurrency=4)
    assert (summary.ok, summary.failed, summary.failed_earlier) == (1, FAILURES_KEPT + 2, 0)
    assert len(summary.failures) == FAILURES_KEPT
    by_id = {record.id: record for record in records(tmp_path / "out")}
    for failure in summary.failures:
        record = by_id[failure.id]
        assert record.error is not None
        assert failure.reason == f"{record.error.type}: {record.error.message.splitlines()[0]}"
        assert failure.journal == record.journal and Path(failure.journal).is_file()

    again = run_batch(items, tmp_path / "out", agent="demo", cwd=work, policy=ALLOW)
    assert (again.ran, again.failed, again.failed_earlier) == (0, FAILURES_KEPT + 2, FAILURES_KEPT + 2)
    assert [failure.id for failure in again.failures] == [failure.id for failure in summary.failures]


def test_a_failure_in_the_summary_is_one_line_and_the_record_keeps_the_agent_stderr(tmp_path: Path, work: Path) -> None:
    talker = [sys.executable, "-c", "import sys; sys.stderr.write('usage: talker [--flag]\\nbad flag\\n'); sys.exit(2)"]
    items = write_items(tmp_path / "items.jsonl", [{"id": "talks", "prompt": "x", "agent": talker}])
    command = [sys.executable, "-m", "tinyacp", "batch", str(items), "--out", str(tmp_path / "out"), "--cwd", str(work)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    reason = lines[lines.index("failed:") + 1]
    assert reason.startswith("  talks: AgentExited: ") and "exit code 2" in reason
    assert "stderr" not in reason and "usage: talker" not in reason
    assert lines[lines.index("failed:") + 2] == "    journal: out/journals/talks.jsonl"
    (record,) = records(tmp_path / "out")
    assert record.error is not None and record.error.type == "AgentExited"
    assert "--- agent stderr (tail) ---\nusage: talker [--flag]\nbad flag" in record.error.message


def test_the_command_shows_why_each_item_failed_and_that_retry_failed_runs_them(tmp_path: Path, work: Path) -> None:
    items = write_items(
        tmp_path / "items.jsonl", [{"id": "good", "prompt": "a"}, {"id": "bad", "prompt": "b", "agent": "false"}]
    )
    command = [sys.executable, "-m", "tinyacp", "batch", str(items), "--out", str(tmp_path / "out")]
    command += ["--cwd", str(work), "-y"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    lines = first.stdout.splitlines()
    at = lines.index("failed:")
    assert lines[at + 1].startswith("  bad: AgentExited: ")
    assert lines[at + 2] == "    journal: out/journals/bad.jsonl"  # relative to where the command runs
    assert "--retry-failed" not in first.stdout  # nothing failed before this run

    again = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert again.returncode == 1
    assert "this run: 0 turns" in again.stdout
    hint = again.stdout.splitlines()[-1]
    assert hint.startswith("1 of them failed in an earlier run and were not run again; --retry-failed runs them: ")
    assert hint.endswith(" -y --retry-failed")


def test_ctrl_c_says_what_was_done_what_was_stopped_and_the_command_that_resumes(tmp_path: Path, work: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", [{"id": f"i{n}", "prompt": f"p{n}"} for n in range(6)])
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tinyacp", "batch", str(items), "--out", str(out), "-y"]
    command += ["--agent", "demo --delay 0.1", "--concurrency", "2", "--cwd", str(work)]
    batch = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def one_done_and_one_in_flight() -> bool:
            done = {record.id for record in records(out)} if (out / "results.jsonl").exists() else set()
            begun = {path.stem for path in (out / "journals").glob("*.jsonl")} if out.exists() else set()
            return len(done) >= 1 and bool(begun - done)

        wait_for(one_done_and_one_in_flight, timeout=60, what="a record and a turn in flight")
        batch.send_signal(signal.SIGINT)
        _, stderr = batch.communicate(timeout=60)
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.communicate(timeout=30)
    assert batch.returncode == 130, stderr
    assert "Traceback" not in stderr
    said, resume = stderr.splitlines()[-2:]
    done = len(records(out))
    assert said.startswith(f"interrupted: this run recorded {done} turn(s) (0 failed) in ")
    assert "stopped " in said and "in flight (no record: they run again on resume)" in said
    assert resume.startswith("resume with: tinyacp batch ")

    resumed = subprocess.run(
        [sys.executable, "-m", "tinyacp", *shlex.split(resume.removeprefix("resume with: tinyacp "))],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(record.id for record in records(out)) == [f"i{n}" for n in range(6)]
