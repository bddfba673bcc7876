"""``--mcp-config FILE``: MCP servers for the session, in the ``mcpServers`` JSON format that Claude Desktop,
Cursor and Claude Code read::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                  "env": {"LOG": "1"}},
        "docs":  {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer …"}},
        "old":   {"type": "sse", "url": "https://example.com/sse"}
    }}

A server with a ``command`` is started by the agent over stdio; one with a ``url`` is reached over streamable HTTP
(``"type": "sse"`` for SSE). Environment values are passed as written; no variable is expanded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..._files import read_regular
from ..._messages import (
    AnyMcpServer,
    EnvVariable,
    HttpHeader,
    McpCapabilities,
    McpServer,
    McpServerHttp,
    McpServerSse,
)
from ..shared._exit import UsageProblem

__all__ = ["McpConfigError", "check_transports", "read_mcp_config"]


_MAX_BYTES = 16 * 1024 * 1024
"""An MCP config file lists a few servers; a larger file is not one (and is not read whole into memory)."""


class McpConfigError(UsageProblem):
    """The MCP config file cannot be used; the message says why, for a person (a usage error: exit 2)."""


def read_mcp_config(path: str | os.PathLike[str]) -> list[AnyMcpServer]:
    """The servers of an ``mcpServers`` file, in the file's order.

    Raises:
        McpConfigError: the file cannot be read, is not a regular file, is not JSON (or is nested too deep,
            or larger than 16 MiB), or an entry has the wrong shape.
    """
    where = f"--mcp-config {os.fspath(path)}"
    try:
        data = read_regular(Path(path).expanduser(), _MAX_BYTES)
        if len(data) > _MAX_BYTES:
            raise McpConfigError(f"{where}: larger than {_MAX_BYTES // 1024 // 1024} MiB: not an MCP config")
        document = json.loads(data)
    except OSError as exc:
        raise McpConfigError(f"{where}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise McpConfigError(f"{where}: not JSON: {exc}") from None
    except RecursionError:
        raise McpConfigError(f"{where}: not an MCP config: JSON nested too deep") from None
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f'{where}: expected an object with "mcpServers": {{"name": {{...}}}}')
    return [_server(f"{where}: mcpServers.{name}", name, entry) for name, entry in servers.items()]


def _server(where: str, name: str, entry: Any) -> AnyMcpServer:
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where} must be an object")
    kind = entry.get("type")
    if "command" in entry and kind in (None, "stdio"):
        command, args = entry["command"], entry.get("args", [])
        if not isinstance(command, str) or not command:
            raise McpConfigError(f"{where}.command must be a program name or path")
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise McpConfigError(f"{where}.args must be a list of strings")
        env = [EnvVariable(key, value) for key, value in _pairs(f"{where}.env", entry.get("env", {}))]
        return McpServer(name, command, args, env)
    if "url" in entry and kind in (None, "http", "streamable-http", "sse"):
        url = entry["url"]
        if not isinstance(url, str) or not url:
            raise McpConfigError(f"{where}.url must be a URL")
        headers = [HttpHeader(key, value) for key, value in _pairs(f"{where}.headers", entry.get("headers", {}))]
        return McpServerSse(name, url, headers) if kind == "sse" else McpServerHttp(name, url, headers)
    raise McpConfigError(f'{where}: needs a "command" (stdio) or a "url" (http, or "type": "sse")')


def _pairs(where: str, table: Any) -> list[tuple[str, str]]:
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise McpConfigError(f"{where} must be an object of strings")
    return list(table.items())


def check_transports(servers: list[AnyMcpServer], offered: McpCapabilities) -> str | None:
    """Why the agent cannot take these servers (an http or sse one it did not advertise), or None."""
    for server in servers:
        if isinstance(server, McpServerHttp) and not offered.http:
            what = "stdio" + (", sse" if offered.sse else "")
            return (
                f"MCP server {server.name!r} is reached over http, which the agent does not offer (it offers: {what})"
            )
        if isinstance(server, McpServerSse) and not offered.sse:
            what = "stdio" + (", http" if offered.http else "")
            return f"MCP server {server.name!r} is reached over sse, which the agent does not offer (it offers: {what})"
    return None
