"""The Ray engine on a two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``), started once for the
module: loopback only, no dashboard, Ray's temp dir under the test's tmp path (through a short link), and every
Ray process gone at the end. Turns are placed on both nodes, each id gets exactly one record, actors run at
niceness 0, and a killed actor gives error records, not silent re-runs."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tinyacp
from helpers import Background, wait_for
from helpers.batch import epochs, live_processes, processes_in, records
from tinyacp.batch import run_batch

ALLOW = tinyacp.PermissionPolicy(allow_all=True)
SLOTS = 3  # turns per node: the custom resource each node advertises


def ray_processes(tmp: Path) -> list[int]:
    """Live processes started with this module's Ray temp dir in their environment (Ray's own and the agents)."""
    needle = f"RAY_TMPDIR={tmp}".encode()
    found = []
    for pid, _ in live_processes():
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                if needle in file.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue
    return found


def listening_addresses(pids: list[int]) -> list[str]:
    """The local addresses (hex, as in /proc/net/tcp*) of TCP sockets these processes listen on."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with_target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if with_target.startswith("socket:["):
                    inodes.add(with_target[8:-1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as file:
            for line in file.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    found.append(fields[1].split(":")[0])
    return found


def import_ray() -> None:
    """Ray, imported when the cluster starts rather than when the suite is collected (it costs most of a second
    of CPU in every process that collects this module)."""
    # Before Ray is imported: Ray then takes the loopback address as this machine's, for every node of the cluster.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if os.environ.get("TINYACP_REQUIRE_RAY") != "1":  # CI sets it: there a missing Ray is a failure, not a skip
        pytest.importorskip("ray", reason='the Ray engine tests need the ray extra: pip install -e ".[test,ray]"')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The cluster; yields Ray's temp dir as its processes see it. Only what the engine needs runs on each node:
    no dashboard, no autoscaler monitor and no log monitor (the driver does not print the workers' logs)."""
    import_ray()
    import ray
    from ray.cluster_utils import Cluster

    physical = tmp_path_factory.mktemp("ray")
    # Ray's unix sockets live under its temp dir and a socket path may not pass 107 bytes: Ray gets a short
    # symbolic link to the directory under the test's tmp path (which is long under pytest-xdist).
    short = Path(tempfile.mkdtemp(prefix="tinyacp-ray-"))
    (short / "t").symlink_to(physical, target_is_directory=True)
    tmp = short / "t"
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = str(tmp)  # Ray's temp dir (sessions, sockets, logs) and its address file
    node: dict[str, Any] = {
        "num_cpus": 1,
        "resources": {"tinyacp_turns": SLOTS},
        "node_ip_address": "127.0.0.1",
        "include_log_monitor": False,
    }
    head = {**node, "include_dashboard": False, "no_monitor": True}
    started = Cluster(initialize_head=True, head_node_args=head)
    try:
        started.add_node(**node)
        ray.init(address=started.address, log_to_driver=False, configure_logging=False)
        yield tmp
    finally:
        ray.shutdown()
        started.shutdown()
        if saved is None:
            del os.environ["RAY_TMPDIR"]
        else:
            os.environ["RAY_TMPDIR"] = saved
        try:
            wait_for(lambda: not ray_processes(tmp), timeout=60, what="every Ray process to exit")
        finally:
            (short / "t").unlink()
            short.rmdir()


def no_agent_left_in(work: Path) -> None:
    wait_for(lambda: not processes_in(work), timeout=60, what="the agents to be gone")


# One test: under pytest-xdist, tests of this module could go to different workers, each starting a cluster.
@pytest.mark.slow
def test_the_ray_engine_on_a_two_node_loopback_cluster(
    cluster: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    addresses = listening_addresses(ray_processes(cluster))
    assert addresses
    assert {address[-8:] for address in addresses} == {"0100007F"}  # 127.0.0.1, as IPv4 or IPv4-mapped IPv6

    work = tmp_path / "work"
    work.mkdir()
    turns_are_placed_on_both_nodes_and_each_id_gets_one_record(tmp_path / "placed", work)
    no_agent_left_in(work)
    a_killed_actor_gives_error_records_and_nothing_runs_again(tmp_path / "killed", work)
    no_agent_left_in(work)
    from tinyacp.batch import _ray

    monkeypatch.setattr(_ray, "_CONNECTIONS", False)  # as for a Ray Client, which the actors cannot reach
    turns_go_as_ray_calls_when_the_actors_cannot_reach_the_driver(tmp_path / "calls", work)
    no_agent_left_in(work)


def turns_are_placed_on_both_nodes_and_each_id_gets_one_record(out: Path, work: Path) -> None:
    items = [{"id": n, "prompt": f"p{n}"} for n in range(10)]
    listening: set[str] = set()  # this process's listening sockets, the driver's among them, while turns run
    summary = run_batch(
        items,
        out,
        engine="ray",
        agent="demo",
        cwd=work,
        policy=ALLOW,
        concurrency=6,
        on_progress=lambda _: listening.update(listening_addresses([os.getpid()])),
    )
    assert listening and {address[-8:] for address in listening} == {"0100007F"}, "the driver listens on loopback"
    got = records(out)
    assert sorted(record.id for record in got) == list(range(10))
    assert summary.all_ok and summary.ran == 10 and summary.client_cpu_seconds > 0
    import ray

    alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert len(alive) == 2
    assert {record.node for record in got} == alive
    for record in got:
        assert record.ok and record.epoch == 1 and epochs(record.journal) == [1]


def a_killed_actor_gives_error_records_and_nothing_runs_again(out: Path, work: Path) -> None:
    items = [{"id": f"slow{n}", "prompt": "p"} for n in range(8)]
    batch = Background(
        lambda: run_batch(
            items, out, engine="ray", agent="demo --delay 0.4", cwd=work, policy=ALLOW, concurrency=2 * SLOTS
        ),
        timeout=180,
    )
    wait_for(lambda: len(processes_in(work)) >= 2, timeout=120, what="agents at work")
    agent = processes_in(work)[0]
    fields = dict(live_processes())[agent]
    actor = int(fields[1])  # the agent's parent: the actor's worker process
    assert int(fields[16]) == 0, "the agent runs at niceness 0, not Ray's worker niceness"
    assert int(dict(live_processes())[actor][16]) == 0
    os.kill(actor, signal.SIGKILL)
    summary = batch.join()

    got = records(out)
    assert sorted(record.id for record in got) == sorted(item["id"] for item in items)  # one record each
    lost = [record for record in got if record.error is not None and record.error.type == "ActorDied"]
    assert lost, "the turns of the killed actor are records with their error"
    for record in lost:
        assert not record.ok and record.attempt == 1
        # A turn that was queued on the actor when it died never started its agent: no epoch. One that was
        # running has its one epoch. None is run again: there is never a second.
        assert record.journal is not None
        ran = epochs(record.journal) if Path(record.journal).exists() else []
        assert ran in ([], [1]), "a lost turn is not run again"
        assert record.epoch == (ran[0] if ran else None), "the record names the attempt's epoch, if it began"
    assert summary.failed == len(lost) and summary.ok == len(items) - len(lost)


def turns_go_as_ray_calls_when_the_actors_cannot_reach_the_driver(out: Path, work: Path) -> None:
    items = [{"id": n, "prompt": f"p{n}"} for n in range(4)]
    summary = run_batch(items, out, engine="ray", agent="demo", cwd=work, policy=ALLOW, concurrency=4)
    got = records(out)
    assert sorted(record.id for record in got) == list(range(4)) and summary.all_ok
    assert len({record.node for record in got}) == 2, "the turns are spread over both nodes"
