"""What programs that fail to start print: kimi-cli 1.52's line on stdout, and what the real ``npx`` and ``uvx``
print on stderr without a network or a Python (their exit status included), so that no test needs a network;
and the fakes that print them, first on ``PATH``."""

from __future__ import annotations

import os
from pathlib import Path

KIMI_LINE = "kimi-cli is no longer maintained. Please migrate to Kimi Code: https://github.com/MoonshotAI/kimi-code"

# What the real runners print on stderr without a network (see the module's docstring).
NPM_ENOTFOUND = """\
npm error code ENOTFOUND
npm error syscall getaddrinfo
npm error errno ENOTFOUND
npm error network request to https://registry.npmjs.org/is-odd failed, reason: getaddrinfo ENOTFOUND registry.npmjs.org
npm error network This is a problem related to network connectivity.
"""
NPM_EAI_AGAIN = """\
npm error code EAI_AGAIN
npm error syscall getaddrinfo
npm error errno EAI_AGAIN
npm error request to https://registry.npmjs.org/pkg failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org
"""
UV_DNS = """\
error: Request failed after 3 retries in 12.6s
  cause: Failed to fetch: https://pypi.org/simple/cowsay/
  cause: error sending request for url (https://pypi.org/simple/cowsay/)
  cause: client error (Connect)
  cause: dns error
  cause: error resolving DNS
  cause: failed to lookup address information: Name or service not known
"""
UV_OFFLINE = """\
error: No solution found when resolving tool dependencies
  cause: Because cowsay==6.0 needs to be downloaded from a registry and you require cowsay==6.0, we can conclude \
that your requirements are unsatisfiable.
hint: Packages were unavailable because the network was disabled. When the network is disabled, registry packages \
may only be read from the cache.
"""
# uv fetching a Python (from a mirror named by UV_PYTHON_INSTALL_MIRROR that does not resolve).
UV_PYTHON_DNS = """\
error: Request failed after 3 retries in 6.5s
  cause: Failed to download `https://nonexistent.invalid/20240726/cpython-3.12.4%2B20240726-x86_64-unknown-linux-gnu-\
install_only_stripped.tar.gz`
  cause: error sending request for url (https://nonexistent.invalid/20240726/cpython-3.12.4%2B20240726-x86_64-unknown-\
linux-gnu-install_only_stripped.tar.gz)
  cause: client error (Connect)
  cause: dns error
  cause: error resolving DNS
  cause: failed to lookup address information: Name or service not known
"""
UV_NO_PYTHON = "error: No interpreter found for Python 3.99 in managed installations or search path\n"
UV_OLD_PYTHON = """\
  \u00d7 No solution found when resolving dependencies:
  \u2570\u2500\u25b6 Because the current Python version (3.11.1) does not satisfy Python>=3.13 and all versions of \
bagels depend on Python>=3.13, we can conclude that all versions of bagels cannot be used.
"""

UVX_COWSAY_FAILURES = [
    (
        UV_DNS,
        "uvx could not fetch cowsay==6.0: no network (failed to lookup address information: Name or service not known)",
        "to start it offline: uv tool install cowsay==6.0, then make its program the agent's command in the config "
        "file (`tinyacp agents` names the file)",
    ),
    (
        UV_OFFLINE,
        "uvx could not fetch cowsay==6.0: the network is disabled (UV_OFFLINE) and uv's cache does not have it",
        "to start it offline: uv tool install cowsay==6.0, then make its program the agent's command in the config "
        "file (`tinyacp agents` names the file)",
    ),
    (
        UV_NO_PYTHON,
        "uvx found no Python that cowsay==6.0 can use (No interpreter found for Python 3.99 in managed "
        "installations or search path)",
        "install one with `uv python install 3.99` (it needs the network once), or give uvx --python VERSION",
    ),
]
"""What ``uvx cowsay==6.0`` is named for when uvx fails each of these ways: (its stderr, the message, the first
hint line)."""
UVX_COWSAY_IDS = ["dns", "offline", "no-python"]


def script(path: Path, body: str) -> Path:
    """A shell script at ``path``, executable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def runner_first_on_path(bin_dir: Path, name: str, stderr: str, status: int, env: dict[str, str]) -> dict[str, str]:
    """A fake ``name`` (npx, uvx) in ``bin_dir`` that prints ``stderr`` and exits with ``status``; ``env`` with
    ``bin_dir`` first on its ``PATH``."""
    (bin_dir.parent / f"{name}.err").write_text(stderr)
    script(bin_dir / name, f"cat '{bin_dir.parent / f'{name}.err'}' >&2\nexit {status}\n")
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', os.defpath)}"}
