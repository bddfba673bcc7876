"""tinyacp: a small, strict client for coding agents that speak the Agent Client Protocol (ACP v1).

tinyacp starts the agent as a child process in a process group of its own, talks JSON-RPC 2.0 with it over
stdin/stdout, hands every message to the caller's observer before acting on it, decides permission requests by
the caller's rules (default deny), and keeps its memory within the limits the caller chose. A first program,
against the demo agent that comes with the package:

    import sys
    import tinyacp

    journal = tinyacp.JsonlJournal("run.jsonl")     # an observer: every line, both ways, on disk before we act
    options = tinyacp.Options(command=[sys.executable, "-m", "tinyacp.demo"], epoch=journal.begin_epoch(),
                              observer=journal, policy=tinyacp.PermissionPolicy(kinds=["read"]))
    with tinyacp.Client(options) as client:         # the agent starts in a process group of its own
        client.initialize()
        session = client.new_session(".")
        result = client.prompt(session.id, "What is in this folder?", timeout=60)
    print(result.stop_reason, result.text)          # the group is stopped and reaped when the block ends

Protocol: https://agentclientprotocol.com/
"""

from __future__ import annotations

import importlib

from ._errors import (
    AgentError,
    AgentExited,
    AgentTimeout,
    AuthRequired,
    BatchBusy,
    BatchEngineError,
    BatchError,
    BatchItemError,
    BatchStorageError,
    ClientBusy,
    ClientClosed,
    LimitExceeded,
    MissingDurableObserver,
    NotAdvertised,
    ObserverError,
    ProtocolViolation,
    ReaderExhaustion,
    RequestError,
    SessionNotFound,
    SpawnError,
    TinyAcpError,
    TransferLimitExceeded,
    UnsupportedContent,
    UnsupportedProtocolVersion,
    UsageError,
)
from ._version import __version__

TYPE_CHECKING = False  # not typing's: importing typing would cost every `import tinyacp` several ms
if TYPE_CHECKING:  # the names that load on first use, for type checkers and the API reference
    from typing import Any

    from ._async_client import AsyncClient
    from ._client import Client
    from ._journal import JsonlJournal
    from ._limits import Overflow, OverflowKind, TransferLimits
    from ._messages import (
        AgentCapabilities,
        AgentInfo,
        AgentMessageChunk,
        AgentThoughtChunk,
        AuthMethod,
        AvailableCommand,
        AvailableCommandsUpdate,
        ClientInfo,
        ConfigChoice,
        ConfigOption,
        ConfigOptionUpdate,
        ContentBlock,
        Cost,
        CurrentModeUpdate,
        EnvVariable,
        HttpHeader,
        Initialize,
        LoadedSession,
        McpCapabilities,
        McpServer,
        McpServerHttp,
        McpServerSse,
        ModelInfo,
        Modes,
        PermissionOption,
        PermissionOptionKind,
        PermissionToolCall,
        Plan,
        PlanEntry,
        PromptBlobResource,
        PromptCapabilities,
        PromptContent,
        PromptMedia,
        PromptResourceLink,
        PromptText,
        PromptTextResource,
        Secret,
        Session,
        SessionInfo,
        SessionInfoUpdate,
        SessionMode,
        SessionModels,
        SessionPage,
        SessionState,
        SessionUpdate,
        StopReason,
        SystemPrompt,
        ToolCall,
        ToolCallStatus,
        ToolCallUpdate,
        ToolKind,
        TurnUsage,
        UnknownUpdate,
        UpdateKind,
        UsageUpdate,
        UserMessageChunk,
    )
    from ._observer import BaseObserver, Observer
    from ._options import Options, StderrTarget
    from ._permissions import DecisionSource, PermissionPolicy, PermissionReply, PermissionRequest
    from ._records import AgentMessage, MessageKind, OutgoingMessage, PromptResult, Update
    from .reader import DEFAULT_MAX_LINE, LineReader, ReaderLimits, default_reader_limits

_LAZY: dict[str, str] = {
    "AgentCapabilities": "._messages",
    "AgentInfo": "._messages",
    "AgentMessage": "._records",
    "AgentMessageChunk": "._messages",
    "AgentThoughtChunk": "._messages",
    "AsyncClient": "._async_client",
    "AuthMethod": "._messages",
    "AvailableCommand": "._messages",
    "AvailableCommandsUpdate": "._messages",
    "BaseObserver": "._observer",
    "Client": "._client",
    "ClientInfo": "._messages",
    "ConfigChoice": "._messages",
    "ConfigOption": "._messages",
    "ConfigOptionUpdate": "._messages",
    "ContentBlock": "._messages",
    "Cost": "._messages",
    "CurrentModeUpdate": "._messages",
    "DEFAULT_MAX_LINE": ".reader",
    "DecisionSource": "._permissions",
    "EnvVariable": "._messages",
    "HttpHeader": "._messages",
    "Initialize": "._messages",
    "JsonlJournal": "._journal",
    "LineReader": ".reader",
    "LoadedSession": "._messages",
    "McpCapabilities": "._messages",
    "McpServer": "._messages",
    "McpServerHttp": "._messages",
    "McpServerSse": "._messages",
    "MessageKind": "._records",
    "ModelInfo": "._messages",
    "Modes": "._messages",
    "Observer": "._observer",
    "Options": "._options",
    "OutgoingMessage": "._records",
    "Overflow": "._limits",
    "OverflowKind": "._limits",
    "PermissionOption": "._messages",
    "PermissionOptionKind": "._messages",
    "PermissionPolicy": "._permissions",
    "PermissionReply": "._permissions",
    "PermissionRequest": "._permissions",
    "PermissionToolCall": "._messages",
    "Plan": "._messages",
    "PlanEntry": "._messages",
    "PromptBlobResource": "._messages",
    "PromptCapabilities": "._messages",
    "PromptContent": "._messages",
    "PromptMedia": "._messages",
    "PromptResourceLink": "._messages",
    "PromptResult": "._records",
    "PromptText": "._messages",
    "PromptTextResource": "._messages",
    "ReaderLimits": ".reader",
    "Secret": "._messages",
    "Session": "._messages",
    "SessionInfo": "._messages",
    "SessionInfoUpdate": "._messages",
    "SessionMode": "._messages",
    "SessionModels": "._messages",
    "SessionPage": "._messages",
    "SessionState": "._messages",
    "SessionUpdate": "._messages",
    "StderrTarget": "._options",
    "StopReason": "._messages",
    "SystemPrompt": "._messages",
    "ToolCall": "._messages",
    "ToolCallStatus": "._messages",
    "ToolCallUpdate": "._messages",
    "ToolKind": "._messages",
    "TransferLimits": "._limits",
    "TurnUsage": "._messages",
    "UnknownUpdate": "._messages",
    "Update": "._records",
    "UpdateKind": "._messages",
    "UsageUpdate": "._messages",
    "UserMessageChunk": "._messages",
    "default_reader_limits": ".reader",
}
"""Where each public name lives, for the ones that load when first used (errors and the version load at once)."""

__all__ = [
    "DEFAULT_MAX_LINE",
    "AgentCapabilities",
    "AgentError",
    "AgentExited",
    "AgentInfo",
    "AgentMessage",
    "AgentMessageChunk",
    "AgentThoughtChunk",
    "AgentTimeout",
    "AsyncClient",
    "AuthMethod",
    "AuthRequired",
    "AvailableCommand",
    "AvailableCommandsUpdate",
    "BaseObserver",
    "BatchBusy",
    "BatchEngineError",
    "BatchError",
    "BatchItemError",
    "BatchStorageError",
    "Client",
    "ClientBusy",
    "ClientClosed",
    "ClientInfo",
    "ConfigChoice",
    "ConfigOption",
    "ConfigOptionUpdate",
    "ContentBlock",
    "Cost",
    "CurrentModeUpdate",
    "DecisionSource",
    "EnvVariable",
    "HttpHeader",
    "Initialize",
    "JsonlJournal",
    "LimitExceeded",
    "LineReader",
    "LoadedSession",
    "McpCapabilities",
    "McpServer",
    "McpServerHttp",
    "McpServerSse",
    "MessageKind",
    "MissingDurableObserver",
    "ModelInfo",
    "Modes",
    "NotAdvertised",
    "Observer",
    "ObserverError",
    "Options",
    "OutgoingMessage",
    "Overflow",
    "OverflowKind",
    "PermissionOption",
    "PermissionOptionKind",
    "PermissionPolicy",
    "PermissionReply",
    "PermissionRequest",
    "PermissionToolCall",
    "Plan",
    "PlanEntry",
    "PromptBlobResource",
    "PromptCapabilities",
    "PromptContent",
    "PromptMedia",
    "PromptResourceLink",
    "PromptResult",
    "PromptText",
    "PromptTextResource",
    "ProtocolViolation",
    "ReaderExhaustion",
    "ReaderLimits",
    "RequestError",
    "Secret",
    "Session",
    "SessionInfo",
    "SessionInfoUpdate",
    "SessionMode",
    "SessionModels",
    "SessionNotFound",
    "SessionPage",
    "SessionState",
    "SessionUpdate",
    "SpawnError",
    "StderrTarget",
    "StopReason",
    "SystemPrompt",
    "TinyAcpError",
    "ToolCall",
    "ToolCallStatus",
    "ToolCallUpdate",
    "ToolKind",
    "TransferLimitExceeded",
    "TransferLimits",
    "TurnUsage",
    "UnknownUpdate",
    "UnsupportedContent",
    "UnsupportedProtocolVersion",
    "Update",
    "UpdateKind",
    "UsageError",
    "UsageUpdate",
    "UserMessageChunk",
    "__version__",
    "default_reader_limits",
]


def __getattr__(name: str) -> Any:
    """Load a public name on first use: ``import tinyacp`` (and so ``tinyacp --help``) costs only the errors and
    the version, and a program pays for msgspec and the clients when it first touches them. The value is then
    kept in the module, so later lookups are plain attribute reads.

    Raises:
        AttributeError: no such public name.
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tinyacp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
