"""Check the pinned versions of tinyacp's table of agents against npm and PyPI (needs the network).

    python tools/agent_versions.py            # one line per npx/uvx entry; exit 1 when a pin cannot be installed
    python tools/agent_versions.py --json

For each entry started through ``npx`` or ``uvx`` it asks the package's registry whether the pinned version
exists (and is not yanked or deprecated) and what the newest release is, so that a pin is moved on purpose, after
the newer release was tried, never by a user's first run. It reads ``src/tinyacp/cli/agents/agents.json`` through
tinyacp itself; nothing is written. A release that exists may still not install: mistral-vibe 3.0.3 pins a
dependency release PyPI no longer has, which only installing it shows (``tinyacp agents --check NAME``).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tinyacp.cli.agents._resolve import BUILTIN_AGENTS, AgentSpec

Fetch = Callable[[str], dict[str, Any]]
"""Reads one registry document (JSON) by its URL; raises OSError when it cannot."""

NPM = "https://registry.npmjs.org/"
PYPI = "https://pypi.org/pypi/"


@dataclass(frozen=True)
class Finding:
    """What the registry says of one entry's pin."""

    name: str
    package: str
    pinned: str
    latest: str | None
    installable: bool
    problem: str
    """Why the pin cannot be installed, or what to know of it (deprecated); empty when nothing."""


def split_package(package: str) -> tuple[str, str]:
    """``("@scope/name", "1.2.3")`` from ``@scope/name@1.2.3``; ``("name", "")`` without a version."""
    at = package.rfind("@")
    if at <= 0:  # no version, or only a scope's @
        return package, ""
    return package[:at], package[at + 1 :]


def check_entry(spec: AgentSpec, fetch: Fetch) -> Finding:
    """The registry's word on one ``npx``/``uvx`` entry's pin."""
    name, pinned = split_package(spec.package)
    try:
        if spec.launcher == "npx":
            return _npm(spec.name, name, pinned, fetch(NPM + urllib.parse.quote(name, safe="@")))
        return _pypi(spec.name, name, pinned, fetch(PYPI + urllib.parse.quote(name) + "/json"))
    except (OSError, ValueError) as exc:
        return Finding(spec.name, name, pinned, None, False, f"the registry could not be read: {exc}")


def _npm(agent: str, name: str, pinned: str, document: dict[str, Any]) -> Finding:
    latest = (document.get("dist-tags") or {}).get("latest")
    release = (document.get("versions") or {}).get(pinned)
    if release is None:
        return Finding(agent, name, pinned, latest, False, f"{name}@{pinned} is not on npm")
    deprecated = release.get("deprecated")
    problem = f"deprecated: {deprecated}" if deprecated else ""
    return Finding(agent, name, pinned, latest, True, problem)


def _pypi(agent: str, name: str, pinned: str, document: dict[str, Any]) -> Finding:
    latest = (document.get("info") or {}).get("version")
    files = (document.get("releases") or {}).get(pinned)
    if not files:
        return Finding(agent, name, pinned, latest, False, f"{name}=={pinned} is not on PyPI")
    if all(file.get("yanked") for file in files):
        return Finding(agent, name, pinned, latest, False, f"{name}=={pinned} is yanked")
    return Finding(agent, name, pinned, latest, True, "")


def _fetch(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=30) as answer:  # a fixed https registry
        document: dict[str, Any] = json.load(answer)
        return document


def main(argv: list[str] | None = None, fetch: Fetch = _fetch) -> int:
    """Print one finding per pinned entry; 1 when a pin cannot be installed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args(argv)
    findings = [check_entry(spec, fetch) for spec in BUILTIN_AGENTS.values() if spec.launcher in ("npx", "uvx")]
    if args.json:
        print(json.dumps([asdict(finding) for finding in findings], indent=2))
    else:
        for finding in findings:
            state = "ok" if finding.installable else "CANNOT INSTALL"
            newer = f"; newest {finding.latest}" if finding.latest and finding.latest != finding.pinned else ""
            extra = f"; {finding.problem}" if finding.problem else ""
            print(f"{finding.name:<14} {finding.package}@{finding.pinned}: {state}{newer}{extra}")
    return 0 if all(finding.installable for finding in findings) else 1


if __name__ == "__main__":
    sys.exit(main())
