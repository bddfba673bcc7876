"""tinyacp: a small, strict client for coding agents that speak the Agent Client Protocol (ACP v1).

tinyacp starts the agent as a child process in a process group of its own, talks JSON-RPC 2.0 with it over
stdin/stdout, hands every message to the caller's observer before acting on it, decides permission requests by
the caller's rules (default deny), and keeps its memory within the limits the caller chose.

Protocol: https://agentclientprotocol.com/
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._client import Client
from ._errors import (
    AgentError,
    AgentExited,
    AgentTimeout,
    AuthRequired,
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
from ._version import __version__
from .reader import DEFAULT_MAX_LINE, LineReader, ReaderLimits, default_reader_limits

if TYPE_CHECKING:
    from ._async_client import AsyncClient
    from ._journal import JsonlJournal

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
    # The asyncio client and the journal load on first use, so ``import tinyacp`` stays fast for sync callers.
    if name == "AsyncClient":
        from ._async_client import AsyncClient

        return AsyncClient
    if name == "JsonlJournal":
        from ._journal import JsonlJournal

        return JsonlJournal
    raise AttributeError(f"module 'tinyacp' has no attribute {name!r}")
