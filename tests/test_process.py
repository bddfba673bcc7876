"""The agent's process: its own group, argv without a shell, and a teardown that leaves nothing behind.

Real child processes throughout (``tests/agents/proc_agent.py``). Every test that starts one goes through the
``agents`` fixture, which tears each agent down and then checks that no process of its group, nor any tool
pid the test learned about, is still alive. Liveness is read from /proc here, independently of the code
under test: a zombie counts as gone.
"""

from __future__ import annotations

import _thread
import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import wait_for
from tinyacp import _process
from tinyacp._errors import SpawnError
from tinyacp._process import CLOSED, STDERR_TAIL_BYTES, WOULD_BLOCK, AgentProcess, StderrTarget

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="these checks read /proc")

AGENT = str(Path(__file__).parent / "agents" / "proc_agent.py")
WAIT = 10.0  # the bound on every wait for a condition; a healthy run needs milliseconds


# ------------------------------------------------------------------------------------------------------------
# Helpers: liveness from /proc, waiting for a condition with a deadline.


def _stat(pid: int) -> tuple[bytes, int] | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    return fields[0], int(fields[2])


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in (b"Z", b"X")


def zombie(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] == b"Z"


def group_alive(pgid: int) -> list[int]:
    pids = (int(name) for name in os.listdir("/proc") if name.isdigit())
    return [pid for pid in pids if (stat := _stat(pid)) and stat[1] == pgid and stat[0] not in (b"Z", b"X")]


def open_fds() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


def readable(fd: int, timeout: float = WAIT) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def read_output(proc: AgentProcess, *, until_eof: bool = False) -> bytes:
    """The agent's stdout up to the first newline (or EOF), bounded by WAIT."""
    data = b""
    deadline = time.monotonic() + WAIT
    while until_eof or b"\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out reading the agent's stdout; got {data!r}")
        if not readable(proc.stdout_fd, remaining):
            continue
        try:
            chunk = os.read(proc.stdout_fd, 65536)
        except BlockingIOError:
            continue
        if not chunk:
            break
        data += chunk
    return data


def read_report(proc: AgentProcess) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(read_output(proc).split(b"\n")[0])
    return report


class Agents:
    """Starts agents and remembers every process a test learned about, for the leftover check."""

    def __init__(self) -> None:
        self.procs: list[AgentProcess] = []
        self.pids: set[int] = set()

    def spawn(self, *args: str, stderr: StderrTarget = "discard", **kwargs: Any) -> AgentProcess:
        return self.spawn_argv([sys.executable, AGENT, *args], stderr=stderr, **kwargs)

    def spawn_argv(self, argv: list[str], **kwargs: Any) -> AgentProcess:
        proc = AgentProcess.spawn(argv, **kwargs)
        self.procs.append(proc)
        self.pids.add(proc.pid)
        return proc

    def report(self, proc: AgentProcess) -> dict[str, Any]:
        """Read the agent's report and track every pid in it."""
        report = read_report(proc)
        self.pids.update(report["children"])
        self.pids.update(pid for pid in (report["zombie"], report["escaped"]) if pid is not None)
        return report


@pytest.fixture
def agents() -> Iterator[Agents]:
    started = Agents()
    yield started
    for proc in started.procs:
        proc.terminate(0.1)
    leftovers = {pid for proc in started.procs for pid in group_alive(proc.pgid)}
    leftovers.update(pid for pid in started.pids if alive(pid))
    for pid in leftovers:  # clean up before failing, so one broken test does not spoil the next
        os.kill(pid, signal.SIGKILL)
    assert not leftovers, f"processes left behind: {sorted(leftovers)}"


# ------------------------------------------------------------------------------------------------------------
# Spawning.


def test_the_agent_leads_a_new_process_group(agents: Agents) -> None:
    proc = agents.spawn()
    report = agents.report(proc)
    assert report["pid"] == proc.pid
    assert report["pgid"] == proc.pgid == proc.pid
    assert proc.pgid != os.getpgid(0)


def test_argv_reaches_the_agent_without_a_shell(agents: Agents, tmp_path: Path) -> None:
    tricky = ["; touch pwned", "$HOME", "*", "a b", "`id`", "'\"", ""]
    proc = agents.spawn_argv(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *tricky], cwd=tmp_path
    )
    assert json.loads(read_output(proc)) == tricky
    wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent exited")
    assert list(tmp_path.iterdir()) == []


def test_a_single_string_argv_is_refused_rather_than_split() -> None:
    with pytest.raises(TypeError, match="never runs a shell"):
        AgentProcess.spawn("python -c pass")
    with pytest.raises(ValueError, match="empty"):
        AgentProcess.spawn([])


@pytest.mark.parametrize("target", ["stdout", "pipe", "stringio", "name"])
def test_a_stderr_target_that_would_block_or_mix_with_the_protocol_is_refused(target: str) -> None:
    bad: Any = {
        "stdout": subprocess.STDOUT,
        "pipe": subprocess.PIPE,
        "stringio": io.StringIO(),
        "name": "keep",
    }[target]
    before = open_fds()
    with pytest.raises(ValueError, match="stderr"):
        AgentProcess.spawn([sys.executable, "-c", "pass"], stderr=bad)
    assert open_fds() == before


def test_env_none_inherits_our_environment(agents: Agents, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYACP_TEST_MARK", "inherited")
    proc = agents.spawn_argv([_env_program()])
    assert b"TINYACP_TEST_MARK=inherited\n" in read_output(proc, until_eof=True)


def test_an_env_mapping_is_the_whole_environment(agents: Agents) -> None:
    proc = agents.spawn_argv([_env_program()], env={"ONLY": "this one"})
    assert read_output(proc, until_eof=True) == b"ONLY=this one\n"


def _env_program() -> str:
    program = shutil.which("env")
    if program is None:
        pytest.skip("no env program")
    return program


def test_a_missing_program_is_a_spawn_error_naming_it(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-agent")
    before = open_fds()
    with pytest.raises(SpawnError, match="no-such-agent") as caught:
        AgentProcess.spawn([missing, "--acp"], stderr="tail")
    assert isinstance(caught.value.__cause__, FileNotFoundError)
    assert open_fds() == before


def test_a_bad_cwd_is_a_spawn_error_naming_the_directory(tmp_path: Path) -> None:
    before = open_fds()
    with pytest.raises(SpawnError, match="working directory") as caught:
        AgentProcess.spawn([sys.executable, "-c", "pass"], cwd=tmp_path / "gone", stderr="tail")
    assert isinstance(caught.value.__cause__, FileNotFoundError)
    assert str(tmp_path / "gone") in str(caught.value)
    assert open_fds() == before


def test_a_relative_program_path_spawn_error_says_it_was_looked_up_from_the_agent_cwd(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    with pytest.raises(SpawnError, match="no-such-agent") as caught:
        AgentProcess.spawn(["bin/no-such-agent"], cwd=tmp_path / "agents", stderr="tail")
    assert "looked up from the agent's working directory" in str(caught.value)
    assert str(tmp_path / "agents") in str(caught.value)


def test_a_program_that_is_not_executable_is_a_spawn_error(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    before = open_fds()
    with pytest.raises(SpawnError, match=r"agent\.sh") as caught:
        AgentProcess.spawn([str(script)])
    assert isinstance(caught.value.__cause__, PermissionError)
    assert open_fds() == before


def test_write_reaches_the_agent_and_stdout_fd_carries_its_answer(agents: Agents) -> None:
    proc = agents.spawn("--ignore-term", "--echo")
    agents.report(proc)
    assert proc.write(b'{"jsonrpc":"2.0"}\n') == 18
    assert read_output(proc) == b'{"jsonrpc":"2.0"}\n'
    assert proc.terminate(30.0) == 0  # it ignores SIGTERM: only the EOF can end it cleanly
    assert proc.write(b"late\n") == CLOSED


def test_write_to_an_agent_that_exited_says_closed_instead_of_raising(agents: Agents) -> None:
    proc = agents.spawn("--exit")
    agents.report(proc)
    wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent exited")
    assert proc.write(b"{}\n") == CLOSED


def test_read_into_says_would_block_then_reads_then_says_the_end_once_closed(agents: Agents) -> None:
    proc = agents.spawn("--ignore-term", "--echo")
    agents.report(proc)
    buffer = memoryview(bytearray(64))
    assert proc.read_into(buffer) == WOULD_BLOCK  # the agent wrote nothing yet
    proc.write(b"ping\n")
    assert readable(proc.stdout_fd, WAIT)
    assert bytes(buffer[: proc.read_into(buffer)]) == b"ping\n"
    proc.terminate(30.0)
    assert proc.read_into(buffer) == 0  # our end is closed: nothing more will come


# ------------------------------------------------------------------------------------------------------------
# Teardown.


def test_terminate_stops_an_agent_that_keeps_running_after_stdin_closes(agents: Agents) -> None:
    proc = agents.spawn()
    agents.report(proc)
    assert proc.terminate(5.0) == -signal.SIGTERM
    assert proc.returncode == -signal.SIGTERM


def test_terminate_kills_an_agent_that_ignores_sigterm_after_the_grace(agents: Agents) -> None:
    proc = agents.spawn("--ignore-term")
    agents.report(proc)
    assert proc.terminate(0.1) == -signal.SIGKILL


def test_terminate_lets_an_agent_that_exits_on_stdin_close_exit_cleanly(agents: Agents) -> None:
    # It ignores SIGTERM, so a clean exit inside the (long) grace can only come from the EOF.
    proc = agents.spawn("--ignore-term", "--exit-on-eof")
    agents.report(proc)
    assert proc.terminate(30.0) == 0


def test_terminate_returns_the_status_of_an_agent_already_reaped(agents: Agents) -> None:
    proc = agents.spawn("--exit")
    agents.report(proc)
    wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent exited")
    assert proc.terminate(5.0) == 0


@pytest.mark.parametrize("agent_flags", [[], ["--ignore-term"]], ids=["agent-cooperates", "agent-ignores-term"])
def test_terminate_takes_the_tools_the_agent_started_with_it(agents: Agents, agent_flags: list[str]) -> None:
    proc = agents.spawn(*agent_flags, "--children", "2", "--stubborn-children", "2")
    tools = agents.report(proc)["children"]
    assert len(tools) == 4
    assert all(alive(pid) for pid in tools)
    proc.terminate(0.1)
    assert [pid for pid in tools if alive(pid)] == []
    assert group_alive(proc.pgid) == []


def test_terminate_takes_tools_that_outlived_the_agent(agents: Agents) -> None:
    proc = agents.spawn("--stubborn-children", "2", "--exit")
    tools = agents.report(proc)["children"]
    wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent exited")
    assert all(alive(pid) for pid in tools)
    assert proc.terminate(0.1) == 0
    assert [pid for pid in tools if alive(pid)] == []


def test_terminate_twice_returns_the_same_status(agents: Agents) -> None:
    proc = agents.spawn()
    agents.report(proc)
    first = proc.terminate(1.0)
    assert proc.closed
    assert proc.terminate(1.0) == first == -signal.SIGTERM
    assert proc.stdin_fd == proc.stdout_fd == proc.wake_fd == -1
    assert proc.exit_fd is None


def test_terminate_from_two_threads_at_once_tears_down_once(agents: Agents) -> None:
    proc = agents.spawn("--ignore-term", "--stubborn-children", "1")
    agents.report(proc)
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(proc.terminate(0.2))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert results == [-signal.SIGKILL, -signal.SIGKILL]


def test_terminate_closes_every_fd_and_reaps_the_agent(agents: Agents) -> None:
    before = open_fds()
    proc = agents.spawn("--children", "1", stderr="tail")
    agents.report(proc)
    assert len(open_fds()) > len(before)
    proc.terminate(1.0)
    assert open_fds() == before
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)


def test_terminate_returns_while_a_tool_still_holds_the_agents_stdout(agents: Agents) -> None:
    proc = agents.spawn("--stubborn-children", "1", "--hold-output", "--exit", stderr="tail")
    (tool,) = agents.report(proc)["children"]
    wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent exited")
    assert alive(tool)
    assert not readable(proc.stdout_fd, 0)  # no EOF: the tool still holds the pipe
    assert proc.terminate(0.1) == 0
    assert not alive(tool)


@pytest.mark.timeout(20)
def test_terminate_returns_while_an_escaped_process_holds_stdout_and_stderr(agents: Agents) -> None:
    # The documented limit: a process that left the group (setsid) is out of reach. Teardown must still
    # return, with the stderr drain thread stopped and our fds closed.
    before = open_fds()
    proc = agents.spawn("--escape", "--exit", stderr="tail")
    escaped = agents.report(proc)["escaped"]
    try:
        wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent exited")
        assert proc.terminate(0.1) == 0
        assert open_fds() == before
        assert alive(escaped)
    finally:
        os.kill(escaped, signal.SIGKILL)
    wait_for(lambda: not alive(escaped), timeout=WAIT, what="the escaped process died")


def test_an_agent_dropped_without_terminate_is_killed_with_a_resource_warning(agents: Agents) -> None:
    before = open_fds()
    proc = AgentProcess.spawn([sys.executable, AGENT, "--stubborn-children", "1"], stderr="tail")
    agents.pids.add(proc.pid)
    agents.pids.update(read_report(proc)["children"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del proc  # the last reference
    # subprocess adds its own "still running": the kill is sent, the reap is left to its next Popen.
    assert any("was not terminated" in str(warning.message) for warning in caught)
    assert {warning.category for warning in caught} == {ResourceWarning}
    wait_for(lambda: not any(alive(pid) for pid in agents.pids), timeout=WAIT, what="the dropped agent's group died")
    wait_for(lambda: open_fds() == before, timeout=WAIT, what="the dropped agent's fds were closed")


# ------------------------------------------------------------------------------------------------------------
# The hard stop, from another thread or a signal handler.


def test_start_kill_from_another_thread_kills_a_term_ignoring_agent_after_the_grace(agents: Agents) -> None:
    proc = agents.spawn("--ignore-term", "--stubborn-children", "1")
    (tool,) = agents.report(proc)["children"]
    thread = threading.Thread(target=proc.start_kill, args=(0.05,))
    thread.start()
    thread.join(WAIT)
    assert readable(proc.wake_fd)
    wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent was killed")
    assert proc.returncode == -signal.SIGKILL
    wait_for(lambda: not alive(tool), timeout=WAIT, what="the tool was killed")
    assert proc.terminate(1.0) == -signal.SIGKILL


def test_start_kill_terminates_a_cooperative_agent_at_once(agents: Agents) -> None:
    proc = agents.spawn()
    agents.report(proc)
    proc.start_kill(30.0)
    wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent exited")
    assert proc.returncode == -signal.SIGTERM
    assert proc.terminate(1.0) == -signal.SIGTERM  # and the 30 s timer does not hold it up


def test_start_kill_works_from_a_signal_handler(agents: Agents) -> None:
    proc = agents.spawn("--ignore-term")
    agents.report(proc)
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: proc.start_kill(0.05))
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent was killed")
    assert proc.returncode == -signal.SIGKILL


def test_start_kill_starts_one_timer_however_often_it_is_called(
    agents: Agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[object] = []
    real_start = _thread.start_new_thread

    def counting_start(function: Callable[..., object], args: tuple[Any, ...]) -> int:
        started.append(function)
        return real_start(function, args)

    monkeypatch.setattr(_thread, "start_new_thread", counting_start)
    proc = agents.spawn("--ignore-term")
    agents.report(proc)
    for _ in range(3):
        proc.start_kill(0.05)
    wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent was killed")
    assert len(started) == 1


def test_exit_fd_becomes_readable_when_the_agent_dies(agents: Agents) -> None:
    proc = agents.spawn()
    agents.report(proc)
    if proc.exit_fd is None:
        pytest.skip("no pidfd on this platform")
    assert not readable(proc.exit_fd, 0)
    proc.signal_group(signal.SIGTERM)
    assert readable(proc.exit_fd)
    assert proc.poll() == -signal.SIGTERM


def test_wake_makes_wake_fd_readable_until_drained(agents: Agents) -> None:
    proc = agents.spawn()
    agents.report(proc)
    assert not readable(proc.wake_fd, 0)
    for _ in range(100_000):  # more than the pipe holds: the surplus is dropped, never blocks
        proc.wake()
    assert readable(proc.wake_fd)
    proc.drain_wake()
    assert not readable(proc.wake_fd, 0)
    proc.terminate(1.0)
    proc.wake()  # after close: a no-op, not an error
    proc.drain_wake()


# ------------------------------------------------------------------------------------------------------------
# Group membership.


def test_zombies_in_the_group_do_not_count_as_live_members(agents: Agents) -> None:
    proc = agents.spawn("--zombie")
    dead = agents.report(proc)["zombie"]
    wait_for(lambda: zombie(dead), timeout=WAIT, what="the unreaped tool became a zombie")
    assert proc.live_group_members() == [proc.pid]


def test_a_command_name_with_parentheses_and_spaces_does_not_confuse_the_stat_parser(
    agents: Agents, tmp_path: Path
) -> None:
    # The kernel names the process after the file it ran; a naive split would read "Z" as its state.
    odd = tmp_path / "a) Z 1 (b"
    odd.symlink_to(os.path.realpath(sys.executable))
    proc = agents.spawn_argv([str(odd), AGENT])
    agents.report(proc)
    assert Path(f"/proc/{proc.pid}/comm").read_text().startswith("a) Z 1 (b")
    assert proc.live_group_members() == [proc.pid]


def test_without_proc_the_group_is_asked_with_killpg(agents: Agents, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_process, "_HAVE_PROC", False)
    proc = agents.spawn("--ignore-term", "--exit-on-eof")
    agents.report(proc)
    assert proc.live_group_members() == [proc.pgid]
    assert proc.terminate(5.0) == 0
    assert proc.live_group_members() == []


def test_grace_must_be_a_finite_number_of_seconds(agents: Agents) -> None:
    proc = agents.spawn()
    agents.report(proc)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="grace"):
            proc.terminate(bad)
        with pytest.raises(ValueError, match="grace"):
            proc.start_kill(bad)
    assert proc.poll() is None


def test_repr_tells_the_pid_and_the_state(agents: Agents) -> None:
    proc = agents.spawn()
    agents.report(proc)
    assert repr(proc) == f"<AgentProcess pid={proc.pid} argv0={sys.executable!r} running>"
    proc.terminate(1.0)
    assert repr(proc) == f"<AgentProcess pid={proc.pid} argv0={sys.executable!r} closed, killed by SIGTERM>"


# ------------------------------------------------------------------------------------------------------------
# Stderr.

FLOOD = 10_000_000


def _flood_tail() -> bytes:
    pattern = bytes(range(251))
    return (pattern * (FLOOD // len(pattern) + 1))[:FLOOD][-STDERR_TAIL_BYTES:]


def test_a_chatty_agent_never_blocks_and_the_tail_keeps_its_last_64_kib(agents: Agents) -> None:
    proc = agents.spawn("--stderr-bytes", str(FLOOD), stderr="tail")
    agents.report(proc)
    wait_for(lambda: proc.poll() is not None, timeout=30, what="the agent wrote 10 MB to stderr and exited")
    assert proc.terminate(1.0) == 0
    assert proc.stderr_tail() == _flood_tail()


def test_a_chatty_agent_never_blocks_when_stderr_is_discarded(agents: Agents) -> None:
    proc = agents.spawn("--stderr-bytes", str(FLOOD))
    agents.report(proc)
    wait_for(lambda: proc.poll() is not None, timeout=30, what="the agent wrote 10 MB to stderr and exited")
    assert proc.terminate(1.0) == 0
    assert proc.stderr_tail() is None


def test_the_tail_holds_everything_when_stderr_is_short(agents: Agents) -> None:
    proc = agents.spawn_argv(
        [sys.executable, "-c", "import sys; sys.stderr.write('Traceback: boom\\n')"], stderr="tail"
    )
    wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent exited")
    proc.terminate(1.0)
    assert proc.stderr_tail() == b"Traceback: boom\n"


@pytest.mark.parametrize("as_fd", [False, True], ids=["file", "fd"])
def test_stderr_can_go_to_the_callers_file(agents: Agents, tmp_path: Path, as_fd: bool) -> None:
    log = tmp_path / "agent.log"
    with log.open("wb") as file:
        target: StderrTarget = file.fileno() if as_fd else file
        proc = agents.spawn_argv([sys.executable, "-c", "import os; os.write(2, b'logged')"], stderr=target)
        wait_for(lambda: proc.poll() is not None, timeout=WAIT, what="the agent exited")
        assert proc.terminate(1.0) == 0
    assert log.read_bytes() == b"logged"
    assert proc.stderr_tail() is None


def _blocked_signals(tid: int) -> set[int]:
    """The signals a thread of this process blocks, from its ``SigBlk`` mask in /proc."""
    with open(f"/proc/self/task/{tid}/status") as status:
        mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigBlk:"))
    return {number for number in range(1, 65) if mask >> (number - 1) & 1}


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads each thread's signal mask in /proc")
def test_the_threads_tinyacp_starts_take_no_signal_so_ctrl_c_reaches_the_main_thread(agents: Agents) -> None:
    """A signal sent to the process goes to any thread that does not block it; the Python handler then waits for
    the main thread to run Python code. If a helper could take Ctrl-C, a main thread blocked in a wait would sleep
    through it. The stderr tail and the kill timer block every signal; the main thread blocks none of them."""
    before = {int(tid) for tid in os.listdir("/proc/self/task")}
    proc = agents.spawn("--ignore-term", stderr="tail")  # the stderr tail: a thread of ours
    agents.report(proc)
    proc.start_kill(5.0)  # the kill timer: another (the agent ignores the SIGTERM, so the timer waits)
    ours = {int(tid) for tid in os.listdir("/proc/self/task")} - before
    try:
        assert len(ours) == 2, "the stderr tail and the kill timer are running"
        catchable = {int(sig) for sig in signal.valid_signals() if sig not in (signal.SIGKILL, signal.SIGSTOP)}
        for tid in ours:
            assert catchable <= _blocked_signals(tid)
        assert signal.SIGINT not in _blocked_signals(threading.get_native_id())
    finally:
        proc.terminate(0.5)
