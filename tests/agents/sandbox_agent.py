"""An ACP agent that tries things and says how each went: what the sandbox tests ask it to do, inside bubblewrap.

It answers ``initialize`` and ``session/new``. Each prompt's text is a JSON list of probes; the agent runs them in
order and answers with one ``agent_message_chunk`` whose text is a JSON list of results, one per probe, then ends
the turn. A probe is ``{"op": ..., ...}``:

- ``write`` (``path``): create or truncate the file and write a line. ``read`` (``path``): read the file.
- ``connect`` (``host``, ``port``): open a TCP connection, 5 s at most.
- ``run`` (``argv``): run a program, 30 s at most; the result holds its exit status and output.
- ``setuid`` (``uid``): ``os.setuid``. ``whoami``: the uid, gid and effective capabilities.
- ``spawn``: start a process that leaves our session (``setsid``) and sleeps for a minute; the result holds its
  pid as seen inside.

A result is ``{"ok": true, ...}`` or ``{"ok": false, "error": "<errno name or exception>"}``.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from typing import Any


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, OSError) and exc.errno is not None:
        return {"ok": False, "error": errno.errorcode.get(exc.errno, str(exc.errno))}
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def _write(probe: dict[str, Any]) -> dict[str, Any]:
    with open(probe["path"], "w") as file:
        file.write("written from inside the sandbox\n")
    return {"ok": True}


def _read(probe: dict[str, Any]) -> dict[str, Any]:
    with open(probe["path"]) as file:
        return {"ok": True, "text": file.read()}


def _connect(probe: dict[str, Any]) -> dict[str, Any]:
    with socket.create_connection((probe["host"], probe["port"]), timeout=5):
        return {"ok": True}


def _run(probe: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        probe["argv"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, check=False
    )
    return {"ok": done.returncode == 0, "code": done.returncode, "output": (done.stdout + done.stderr)[-2000:]}


def _setuid(probe: dict[str, Any]) -> dict[str, Any]:
    os.setuid(probe["uid"])
    return {"ok": True, "uid": os.getuid()}


def _whoami(probe: dict[str, Any]) -> dict[str, Any]:
    with open("/proc/self/status") as file:
        caps = next(line.split()[1] for line in file if line.startswith("CapEff:"))
    return {"ok": True, "uid": os.getuid(), "gid": os.getgid(), "cap_eff": caps}


def _spawn(probe: dict[str, Any]) -> dict[str, Any]:
    child = subprocess.Popen(
        ["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
    )
    CHILDREN.append(child)  # kept, so that no ResourceWarning says it still runs
    return {"ok": True, "pid": child.pid}


CHILDREN: list[subprocess.Popen[bytes]] = []


PROBES = {
    "write": _write,
    "read": _read,
    "connect": _connect,
    "run": _run,
    "setuid": _setuid,
    "whoami": _whoami,
    "spawn": _spawn,
}


def probe(step: dict[str, Any]) -> dict[str, Any]:
    try:
        return PROBES[step["op"]](step)
    except Exception as exc:
        return _error(exc)


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, id_ = message.get("method"), message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": id_, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": id_, "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            text = "".join(block.get("text", "") for block in message["params"]["prompt"])
            results = [probe(step) for step in json.loads(text)]
            chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": json.dumps(results)}}
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": chunk}})
            send({"jsonrpc": "2.0", "id": id_, "result": {"stopReason": "end_turn"}})
        elif id_ is not None:
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "method not found"}})


if __name__ == "__main__":
    main()
