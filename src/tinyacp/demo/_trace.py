"""Which trace the turn joined: the W3C ``traceparent`` a request carries in ``_meta`` (ACP's meta propagation
convention) and the ``TRACEPARENT`` the agent was started with (OpenTelemetry's environment carrier).

The demo has no telemetry of its own; it says what it received, so that a test (or a person) sees the caller's
trace reach the agent both ways. A turn that received neither says nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


def _parsed(value: Any) -> tuple[str, str] | None:
    found = _TRACEPARENT.fullmatch(value.strip()) if isinstance(value, str) else None
    return None if found is None else (found.group(1), found.group(2))


def joined(params: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[str]:
    """The reply's lines about the trace: one for ``_meta.traceparent``, one for ``TRACEPARENT`` (each only when
    it is a valid W3C traceparent)."""
    lines = []
    meta = params.get("_meta")
    found = _parsed(meta.get("traceparent")) if isinstance(meta, dict) else None
    if found is not None:
        lines.append(f"Joined trace {found[0]} (from _meta, parent span {found[1]})\n")
    found = _parsed((os.environ if environ is None else environ).get("TRACEPARENT"))
    if found is not None:
        lines.append(f"Started in trace {found[0]} (from TRACEPARENT, parent span {found[1]})\n")
    return lines
