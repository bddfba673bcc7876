"""The sandbox's tests: bwrap required or skipped, the probing agent, and its results."""

from __future__ import annotations

import os
import sys

import pytest

from helpers import AGENTS
from tinyacp import SandboxUnavailable, _sandbox

SANDBOX_AGENT = [sys.executable, str(AGENTS / "sandbox_agent.py")]
"""``agents/sandbox_agent.py``: each prompt is a JSON list of probes, the reply their results."""


def require_bwrap() -> str:
    """bwrap's path; the test is skipped without it, and fails without it under ``TINYACP_REQUIRE_BWRAP=1`` (CI
    sets it, and installs bwrap)."""
    try:
        return _sandbox.check_available(network=False)
    except SandboxUnavailable as exc:
        if os.environ.get("TINYACP_REQUIRE_BWRAP") == "1":
            pytest.fail(f"the sandbox tests need bwrap (TINYACP_REQUIRE_BWRAP=1): {exc}")
        pytest.skip(f"the sandbox tests need bwrap: {exc}")
