"""A real trace backend for the tests: Arize Phoenix (``phoenix serve`` from the ``trace-backend`` extra), started
on loopback in a temporary working directory, and read back through its own REST API.

Each test sends its spans to a project of its own (the resource attribute ``openinference.project.name``), so
tests sharing one server never see each other's spans. Without Phoenix the tests that need it are skipped, except
where ``TINYACP_REQUIRE_OTEL_BACKEND=1`` (CI sets it): there a missing backend is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REQUIRE = "TINYACP_REQUIRE_OTEL_BACKEND"
START_TIMEOUT = 180.0
"""Phoenix starts in about 20 s on a loaded two-core machine (it migrates its SQLite database first)."""


def missing_backend(why: str) -> None:
    """Skip, or fail where the backend is required."""
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"the trace backend's tests need {why} ({REQUIRE}=1)")
    pytest.skip(f"no trace backend: {why}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, timeout: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


class Phoenix:
    """A running Phoenix: ``url`` (its HTTP server), ``traces_endpoint`` (OTLP over HTTP)."""

    def __init__(self, url: str, proc: subprocess.Popen[bytes], workdir: Path) -> None:
        self.url = url
        self.traces_endpoint = f"{url}/v1/traces"
        self.proc = proc
        self.workdir = workdir

    def projects(self) -> list[dict[str, Any]]:
        """The projects (``name``, ``id``) as the REST API lists them."""
        found: list[dict[str, Any]] = _get(f"{self.url}/v1/projects")["data"]
        return found

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span the project holds, as Phoenix's REST API gives them (``/v1/projects/{name}/spans``)."""
        found: list[dict[str, Any]] = []
        cursor = None
        while True:
            query = {"limit": "1000"} | ({"cursor": cursor} if cursor else {})
            url = f"{self.url}/v1/projects/{urllib.parse.quote(project)}/spans?{urllib.parse.urlencode(query)}"
            try:
                page = _get(url)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:  # no span reached the project yet
                    return []
                raise
            found.extend(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                return found

    def wait_spans(
        self, project: str, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """The project's spans once ``done`` holds of them (Phoenix stores what it receives asynchronously)."""
        deadline = time.monotonic() + timeout
        spans: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            spans = self.spans(project)
            if done(spans):
                return spans
            time.sleep(0.2)
        names = sorted(span["name"] for span in spans)
        raise AssertionError(f"the spans of {project} never were what the test waits for: {names}")

    def project_env(self, project: str) -> dict[str, str]:
        """The standard variables that make a command export its spans to ``project`` of this server."""
        return {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.traces_endpoint,
            "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        }


def new_project() -> str:
    return f"tinyacp-{uuid.uuid4().hex[:12]}"


def _command() -> list[str]:
    script = Path(sys.executable).with_name("phoenix")
    if script.exists():
        return [str(script), "serve"]
    found = shutil.which("phoenix")
    if found is None:
        missing_backend("arize-phoenix (pip install -e '.[trace-backend]')")
    return [str(found), "serve"]


@contextmanager
def running_phoenix() -> Iterator[Phoenix]:
    """Start ``phoenix serve`` on 127.0.0.1 (a free port; its gRPC receiver on a port the system picks), in a
    temporary working directory, and stop its process group at the end."""
    command = _command()
    workdir = Path(tempfile.mkdtemp(prefix="tinyacp-phoenix-"))
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": "0",
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (workdir / "phoenix.log").open("wb")
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                missing_backend(f"phoenix serve, which exited: {(workdir / 'phoenix.log').read_text()[-2000:]}")
            try:
                _get(f"{url}/v1/projects", timeout=2)
                break
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    missing_backend(f"phoenix serve, which did not answer within {START_TIMEOUT:.0f} s")
                time.sleep(0.5)
        yield Phoenix(url, proc, workdir)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


def by_name(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The spans by name (a name given twice: the last one)."""
    return {span["name"]: span for span in spans}


def parent_of(span: dict[str, Any], spans: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The span whose id is ``span``'s parent's, among ``spans``."""
    for other in spans:
        if other["context"]["span_id"] == span["parent_id"]:
            return other
    return None


def stored_text(spans: list[dict[str, Any]]) -> str:
    """Everything the backend stored of the spans, as one text to search for what must not be there."""
    return json.dumps(spans, ensure_ascii=False)
