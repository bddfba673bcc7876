"""Typed, immutable shapes of the ACP v1 messages the client writes and reads.

The shapes follow the stable schema (https://agentclientprotocol.com/protocol/schema). What we *write* is strict:
every line validates against the schema. What we *read* is tolerant where the schema is (unknown fields are
ignored, enum-like strings such as a tool kind stay plain strings so a newer agent's value does not break us) and
strict where it matters (``jsonrpc`` must be ``"2.0"``; responses are matched to ids we sent).

msgspec decodes each ``session/update`` line in one typed pass (the hot path); everything else goes through a
small envelope with its parts left as :class:`msgspec.Raw` until we know what they are.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeAlias

import msgspec

from ._constants import SYSTEM_PROMPT_MODES

__all__ = [
    "AgentCapabilities",
    "AgentInfo",
    "AgentMessageChunk",
    "AgentThoughtChunk",
    "AuthMethod",
    "AvailableCommand",
    "AvailableCommandsUpdate",
    "ClientInfo",
    "CompactionSummaryChunk",
    "CompactionUpdate",
    "ConfigChoice",
    "ConfigOption",
    "ConfigOptionUpdate",
    "ContentBlock",
    "Cost",
    "CurrentModeUpdate",
    "EnvVariable",
    "HttpHeader",
    "Initialize",
    "LoadedSession",
    "McpCapabilities",
    "McpServer",
    "McpServerHttp",
    "McpServerSse",
    "ModelInfo",
    "Modes",
    "Notice",
    "PermissionOption",
    "PermissionOptionKind",
    "Plan",
    "PlanEntry",
    "PlanFile",
    "PlanItems",
    "PlanMarkdown",
    "PlanRemoved",
    "PlanUpdate",
    "PromptBlobResource",
    "PromptCapabilities",
    "PromptContent",
    "PromptMedia",
    "PromptResourceLink",
    "PromptText",
    "PromptTextResource",
    "Secret",
    "Session",
    "SessionInfo",
    "SessionInfoUpdate",
    "SessionMessage",
    "SessionMessageChunk",
    "SessionMode",
    "SessionModels",
    "SessionPage",
    "SessionState",
    "SessionUpdate",
    "StopReason",
    "Subagent",
    "SubagentUpdate",
    "SystemPrompt",
    "ToolCall",
    "ToolCallStatus",
    "ToolCallUpdate",
    "ToolKind",
    "TurnUsage",
    "UnknownUpdate",
    "UpdateKind",
    "UsageUpdate",
    "UserMessageChunk",
]

PROTOCOL_VERSION = 1

RequestId: TypeAlias = int | str | None
"""A JSON-RPC id as the agent may send it: a number, a string, or null."""


# --------------------------------------------------------------------------------------------------------------
# Enumerations. Received values are kept as plain strings on the structs; these enums are StrEnums so that
# ``update.payload.kind == ToolKind.EDIT`` reads well and an unknown value from a newer agent still decodes.


class UpdateKind(enum.StrEnum):
    """The ``sessionUpdate`` discriminator: the kinds tinyacp types, and UNKNOWN for anything else.

    The first eleven are ACP v1 as of schema v1.21; ``notice`` and the two compaction kinds are stable since
    v1.25 (sent only to a client that opts in: :class:`~tinyacp.ClientFeatures`); the plan operations and the
    subagent kinds are in the SDK 2.4.0 schema (opt-ins too).
    """

    USER_MESSAGE_CHUNK = "user_message_chunk"
    AGENT_MESSAGE_CHUNK = "agent_message_chunk"
    AGENT_THOUGHT_CHUNK = "agent_thought_chunk"
    TOOL_CALL = "tool_call"
    TOOL_CALL_UPDATE = "tool_call_update"
    PLAN = "plan"
    AVAILABLE_COMMANDS_UPDATE = "available_commands_update"
    CURRENT_MODE_UPDATE = "current_mode_update"
    CONFIG_OPTION_UPDATE = "config_option_update"
    SESSION_INFO_UPDATE = "session_info_update"
    USAGE_UPDATE = "usage_update"
    NOTICE = "notice"
    COMPACTION_UPDATE = "compaction_update"
    COMPACTION_SUMMARY_CHUNK = "compaction_summary_chunk"
    PLAN_UPDATE = "plan_update"
    PLAN_REMOVED = "plan_removed"
    SUBAGENT_UPDATE = "subagent_update"
    SESSION_MESSAGE = "session_message"
    SESSION_MESSAGE_CHUNK = "session_message_chunk"
    UNKNOWN = "unknown"
    """A kind newer than these, or a known kind whose fields break the schema; the raw line is kept."""


class StopReason(enum.StrEnum):
    """Why the agent ended a prompt turn. An unknown value is kept as its plain string instead."""

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    MAX_TURN_REQUESTS = "max_turn_requests"
    REFUSAL = "refusal"
    CANCELLED = "cancelled"


class ToolKind(enum.StrEnum):
    """The category a tool call claims; the agent chooses it, so treat it as a claim."""

    READ = "read"
    EDIT = "edit"
    DELETE = "delete"
    MOVE = "move"
    SEARCH = "search"
    EXECUTE = "execute"
    THINK = "think"
    FETCH = "fetch"
    SWITCH_MODE = "switch_mode"
    OTHER = "other"


class ToolCallStatus(enum.StrEnum):
    """The state of a tool call (v1 has no ``cancelled``)."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"


class PermissionOptionKind(enum.StrEnum):
    """What choosing a permission option means. Only the kind is reliable: option ids differ per agent."""

    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"
    REJECT_ALWAYS = "reject_always"


# --------------------------------------------------------------------------------------------------------------
# What the caller builds: client info, MCP servers, prompt content.


class _Out(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """Base of what we write: camelCase names, defaults left out of the line."""


class ClientInfo(_Out, frozen=True):
    """Our name and version as sent in ``initialize`` (the schema's ``Implementation``)."""

    name: str
    version: str
    title: str | None = None


class EnvVariable(_Out, frozen=True):
    """One environment variable for a stdio MCP server."""

    name: str
    value: str


class HttpHeader(_Out, frozen=True):
    """One HTTP header for an http or sse MCP server."""

    name: str
    value: str


# The schema requires ``args``/``env`` and ``headers`` even when empty, so MCP servers write their defaults.
class McpServer(_Out, frozen=True, omit_defaults=False):
    """An MCP server the agent starts as a stdio subprocess (the wire shape has no ``type`` field)."""

    name: str
    command: str
    args: Sequence[str] = ()
    env: Sequence[EnvVariable] = ()


class McpServerHttp(_Out, frozen=True, omit_defaults=False, tag_field="type", tag="http"):
    """An MCP server reached over streamable HTTP (needs ``mcpCapabilities.http``)."""

    name: str
    url: str
    headers: Sequence[HttpHeader] = ()


class McpServerSse(_Out, frozen=True, omit_defaults=False, tag_field="type", tag="sse"):
    """An MCP server reached over SSE (needs ``mcpCapabilities.sse``)."""

    name: str
    url: str
    headers: Sequence[HttpHeader] = ()


AnyMcpServer: TypeAlias = McpServer | McpServerHttp | McpServerSse


class PromptText(_Out, frozen=True):
    """A text block: every agent accepts it."""

    text: str

    def _wire(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


class PromptMedia(_Out, frozen=True):
    """An image or audio block, ``data`` in base64. Needs ``promptCapabilities.image`` or ``.audio``."""

    type: Literal["image", "audio"]
    data: str
    mime_type: str
    uri: str | None = None

    def __post_init__(self) -> None:
        if self.type not in ("image", "audio"):
            raise ValueError(f"PromptMedia.type must be 'image' or 'audio', not {self.type!r}")
        if self.type == "audio" and self.uri is not None:
            raise ValueError("an audio block has no uri in ACP v1")

    @classmethod
    def image(cls, data: str, mime_type: str, uri: str | None = None) -> PromptMedia:
        """An image block."""
        return cls("image", data, mime_type, uri)

    @classmethod
    def audio(cls, data: str, mime_type: str) -> PromptMedia:
        """An audio block."""
        return cls("audio", data, mime_type)

    def _wire(self) -> dict[str, Any]:
        wire = {"type": self.type, "data": self.data, "mimeType": self.mime_type}
        if self.uri is not None:
            wire["uri"] = self.uri
        return wire


class PromptResourceLink(_Out, frozen=True):
    """A link to a resource the agent may fetch itself: every agent accepts it."""

    uri: str
    name: str
    mime_type: str | None = None
    title: str | None = None
    description: str | None = None
    size: int | None = None

    def _wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = msgspec.to_builtins(self)
        wire["type"] = "resource_link"
        return wire


class PromptTextResource(_Out, frozen=True):
    """A text resource embedded in the prompt. Needs ``promptCapabilities.embeddedContext``."""

    uri: str
    text: str
    mime_type: str | None = None

    def _wire(self) -> dict[str, Any]:
        return {"type": "resource", "resource": msgspec.to_builtins(self)}


class PromptBlobResource(_Out, frozen=True):
    """A binary resource embedded in the prompt, ``blob`` in base64. Needs ``embeddedContext``."""

    uri: str
    blob: str
    mime_type: str | None = None

    def _wire(self) -> dict[str, Any]:
        return {"type": "resource", "resource": msgspec.to_builtins(self)}


PromptContent: TypeAlias = PromptText | PromptMedia | PromptResourceLink | PromptTextResource | PromptBlobResource


def required_capability(block: PromptContent) -> str | None:
    """The ``promptCapabilities`` field a block needs, or None for the baseline blocks."""
    if isinstance(block, PromptMedia):
        return block.type
    if isinstance(block, PromptTextResource | PromptBlobResource):
        return "embeddedContext"
    return None


def prompt_blocks(content: str | Sequence[PromptContent]) -> list[PromptContent]:
    """Normalise a prompt: a str is one text block; anything else must be a sequence of blocks."""
    if isinstance(content, str):
        return [PromptText(content)]
    blocks = list(content)
    for block in blocks:
        if not isinstance(
            block, PromptText | PromptMedia | PromptResourceLink | PromptTextResource | PromptBlobResource
        ):
            raise TypeError(f"a prompt block must be a PromptContent value, not {type(block).__name__}")
    return blocks


def wire_blocks(blocks: Sequence[PromptContent]) -> list[dict[str, Any]]:
    """The prompt blocks as the schema's ContentBlock objects."""
    return [block._wire() for block in blocks]


# --------------------------------------------------------------------------------------------------------------
# What the agent answers: initialize, session/new, session/prompt.


class _In(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """Base of what we read: camelCase names, unknown fields ignored.

    ``gc=False``: a decoded message is a tree, so no reference cycle runs through it and the garbage collector
    need not track it; that makes the hot path's decode about a fifth faster. (Appending a struct into one of its
    own decoded lists would make an uncollectable cycle: don't.)"""


class AgentInfo(_In, frozen=True):
    """The agent's name and version from ``initialize`` (the schema's ``Implementation``)."""

    name: str
    version: str
    title: str | None = None


class PromptCapabilities(_In, frozen=True):
    """Which prompt blocks beyond text and resource links the agent accepts."""

    image: bool = False
    audio: bool = False
    embedded_context: bool = False

    def allows(self, capability: str) -> bool:
        """Whether the named capability (``image``, ``audio``, ``embeddedContext``) is advertised."""
        return {"image": self.image, "audio": self.audio, "embeddedContext": self.embedded_context}[capability]


class McpCapabilities(_In, frozen=True):
    """Which MCP transports beyond stdio the agent can connect to."""

    http: bool = False
    sse: bool = False


class AgentCapabilities(_In, frozen=True):
    """What the agent can do beyond the baseline."""

    load_session: bool = False
    prompt_capabilities: PromptCapabilities = PromptCapabilities()
    mcp_capabilities: McpCapabilities = McpCapabilities()
    session_capabilities: dict[str, Any] = {}
    auth: dict[str, Any] = {}


class AuthMethod(_In, frozen=True):
    """A way to authenticate the agent offers (``type`` is None for the default agent-handled kind)."""

    id: str
    name: str
    description: str | None = None
    type: str | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None


class Initialize(_In, frozen=True):
    """The agent's answer to ``initialize``."""

    protocol_version: int
    agent_capabilities: AgentCapabilities = AgentCapabilities()
    auth_methods: list[AuthMethod] = []
    agent_info: AgentInfo | None = None

    @property
    def load_session(self) -> bool:
        """Whether the agent can load earlier sessions."""
        return self.agent_capabilities.load_session

    @property
    def prompt_capabilities(self) -> PromptCapabilities:
        """Which prompt blocks beyond text and resource links the agent accepts."""
        return self.agent_capabilities.prompt_capabilities

    @property
    def mcp_capabilities(self) -> McpCapabilities:
        """Which MCP transports beyond stdio the agent supports."""
        return self.agent_capabilities.mcp_capabilities


class VersionProbe(_In, frozen=True):
    """Reads just the protocol version, whatever its type, so a wrong one is reported rather than crashing."""

    protocol_version: Any = msgspec.UNSET


class SessionMode(_In, frozen=True):
    """One mode the agent can run a session in."""

    id: str
    name: str
    description: str | None = None


class Modes(_In, frozen=True):
    """The session's current mode and the modes available."""

    current_mode_id: str
    available_modes: list[SessionMode] = []


class ConfigChoice(_In, frozen=True):
    """One value a select config option can take."""

    value: str
    name: str = ""
    description: str | None = None


class ConfigOption(_In, frozen=True):
    """One of the session's config options (https://agentclientprotocol.com/protocol/session-config-options).

    ``type`` is ``select`` (``current_value`` is a value id, ``options`` its choices, flat or grouped) or
    ``boolean`` (``current_value`` is a bool). An option of another type is kept as the agent sent it and
    ignored: it cannot be set without ``force=True``.
    """

    id: str
    name: str = ""
    type: str = "select"
    current_value: Any = None
    options: list[dict[str, Any]] = []
    """The choices of a select option as sent: value objects, or groups holding them."""
    category: str | None = None
    description: str | None = None

    @property
    def choices(self) -> tuple[ConfigChoice, ...]:
        """The values a select option can take, groups flattened; the unreadable ones left out."""
        flat: list[ConfigChoice] = []
        for item in self.options:
            entries = item.get("options") if "group" in item else [item]
            for entry in entries if isinstance(entries, list) else ():
                try:
                    flat.append(msgspec.convert(entry, ConfigChoice))
                except msgspec.ValidationError:
                    continue
        return tuple(flat)

    @property
    def values(self) -> tuple[str, ...]:
        """The value ids of a select option."""
        return tuple(choice.value for choice in self.choices)


class ModelInfo(_In, frozen=True):
    """A model the session can use, from the legacy ``models`` field of a session answer."""

    model_id: str
    name: str = ""
    description: str | None = None


class SessionModels(_In, frozen=True):
    """The legacy (pre-config-option) model state some agents still send (Gemini CLI): see ``set_model``."""

    current_model_id: str
    available_models: list[ModelInfo] = []


class Session(_In, frozen=True):
    """A session the agent opened, resumed or loaded: pass ``id`` to ``prompt``."""

    id: str = msgspec.field(name="sessionId")
    modes: Modes | None = None
    config_options: tuple[ConfigOption, ...] = ()
    """The options the agent offered, in its order (an option of an unknown type is kept and ignored)."""
    models: SessionModels | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class LoadedSession(msgspec.Struct, frozen=True):
    """A session loaded with ``load_session``: the agent replayed its history as updates, then answered."""

    session: Session
    replayed_updates: int
    """How many updates for this session the agent sent before its answer (each went to ``on_update``)."""


class SessionInfo(_In, frozen=True):
    """One session as ``session/list`` reports it."""

    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None
    additional_directories: list[str] = []
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class SessionPage(msgspec.Struct, frozen=True):
    """One page of ``list_sessions``: pass ``next_cursor`` back for the next page (None: the last one)."""

    sessions: tuple[SessionInfo, ...]
    next_cursor: str | None = None


class SessionState(msgspec.Struct, frozen=True):
    """A session's modes, config options, models and commands as the agent last reported them.

    ``current_mode_update``, ``config_option_update`` and ``available_commands_update`` are applied once the
    observer has recorded them; a successful ``set_mode``, ``set_config_option`` or ``set_model`` too.
    """

    session_id: str
    modes: Modes | None = None
    config_options: tuple[ConfigOption, ...] = ()
    models: SessionModels | None = None
    available_commands: tuple[AvailableCommand, ...] = ()

    def option(self, config_id: str) -> ConfigOption | None:
        """The config option with this id, if the session has it."""
        for option in self.config_options:
            if option.id == config_id:
                return option
        return None

    def model_option(self) -> ConfigOption | None:
        """The select option whose category is ``model``, if any."""
        for option in self.config_options:
            if option.category == "model" and option.type == "select":
                return option
        return None


class SessionAnswer(_In, frozen=True):
    """The answer to ``session/new``, ``session/load`` and ``session/resume``, its options still raw."""

    session_id: str | None = None
    modes: Any = None
    config_options: Any = None
    models: Any = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


def _lenient(value: Any, kind: Any) -> Any:
    """``value`` converted to ``kind``, or None when it does not fit (the schema's default-on-error)."""
    if value is None:
        return None
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError:
        return None


def config_options(value: Any) -> tuple[ConfigOption, ...]:
    """The readable config options of a list as sent; an unreadable item is skipped, as the schema allows."""
    if not isinstance(value, list):
        return ()
    found = (_lenient(item, ConfigOption) for item in value)
    return tuple(option for option in found if option is not None)


def session_from(answer: SessionAnswer, session_id: str) -> Session:
    """The typed session from an answer (the id of a load or resume is the one asked for)."""
    return Session(
        answer.session_id or session_id,
        _lenient(answer.modes, Modes),
        config_options(answer.config_options),
        _lenient(answer.models, SessionModels),
        answer.meta,
    )


class TurnUsage(msgspec.Struct, frozen=True, rename="camel"):
    """What a prompt turn used, from the answer's ``usage`` and from the turn's last ``usage_update``.

    Token counts come from the answer (Claude and OpenCode send them); the context window and the cost from the
    last ``usage_update`` of the turn. A value the agent did not report is None.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None
    context_used: int | None = None
    """Tokens in the context window (``usage_update.used``)."""
    context_size: int | None = None
    """The context window's size (``usage_update.size``)."""
    cost: Cost | None = None
    """The session's cumulative cost so far (``usage_update.cost``)."""


def turn_usage(answer: Any, last: UsageUpdate | None) -> tuple[TurnUsage | None, bool]:
    """The turn's usage, and whether the answer's ``usage`` was read (else it stays in ``PromptResult.meta``)."""
    tokens = None
    if isinstance(answer, dict) and answer and set(answer) <= _USAGE_KEYS:
        tokens = _lenient(answer, TurnUsage)
    if tokens is None and last is None:
        return None, False
    usage = tokens or TurnUsage()
    if last is not None:
        usage = msgspec.structs.replace(usage, context_used=last.used, context_size=last.size, cost=last.cost)
    return usage, tokens is not None


_USAGE_KEYS = frozenset(
    ("inputTokens", "outputTokens", "totalTokens", "thoughtTokens", "cachedReadTokens", "cachedWriteTokens")
)


class Secret:
    """A value that must never be stored: written to the agent as its plain value, never to a journal.

    Put it anywhere in what a call sends (``meta={"api-key": Secret(key)}``). The :class:`~tinyacp.OutgoingMessage`
    handed to ``on_send`` carries the exact line and, in ``secrets``, the secrets it contains, so an observer can
    redact them (:meth:`~tinyacp.OutgoingMessage.redacted`); :class:`~tinyacp.JsonlJournal` does.

    Raises:
        TypeError: ``value`` is not a non-empty str.
    """

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise TypeError("a Secret holds a non-empty str")
        self.value = value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.value == self.value

    def __hash__(self) -> int:
        return hash((Secret, self.value))


class SystemPrompt(msgspec.Struct, frozen=True):
    """Text the agent adds to (``append``) or puts in place of (``override``) its own system prompt.

    Sent as ``systemPrompt`` on ``session/new``, ``session/load`` and ``session/resume``, only to an agent that
    advertises ``sessionCapabilities.systemPrompt`` (``override`` only with its ``override`` sub-capability).
    It is not kept by the agent: send it again on every load and resume.
    """

    text: str
    mode: Literal["append", "override"] = "append"

    def __post_init__(self) -> None:
        if self.mode not in SYSTEM_PROMPT_MODES:
            raise ValueError(f"SystemPrompt.mode must be 'append' or 'override', not {self.mode!r}")

    def _wire(self) -> dict[str, Any]:
        return {"mode": self.mode, "content": [{"type": "text", "text": self.text}]}


def stop_reason(value: str) -> StopReason | str:
    """The stop reason as a :class:`StopReason`, or the agent's own string when it is not a v1 value."""
    try:
        return StopReason(value)
    except ValueError:
        return value


# --------------------------------------------------------------------------------------------------------------
# session/update payloads: a tagged union decoded in one pass.


class ContentBlock(_In, frozen=True):
    """A content block as the agent sent it: ``type`` says which of the other fields are set."""

    type: str
    text: str | None = None
    data: str | None = None
    mime_type: str | None = None
    uri: str | None = None
    name: str | None = None
    title: str | None = None
    description: str | None = None
    size: int | None = None
    resource: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None


class _Update(_In, frozen=True, tag_field="sessionUpdate"):
    kind: ClassVar[UpdateKind]


class _Chunk(_Update, frozen=True):
    content: ContentBlock
    message_id: str | None = None


class UserMessageChunk(_Chunk, frozen=True, tag="user_message_chunk"):
    """A piece of the user's message, as the agent echoes or replays it."""

    kind: ClassVar[UpdateKind] = UpdateKind.USER_MESSAGE_CHUNK


class AgentMessageChunk(_Chunk, frozen=True, tag="agent_message_chunk"):
    """A piece of the agent's reply."""

    kind: ClassVar[UpdateKind] = UpdateKind.AGENT_MESSAGE_CHUNK


class AgentThoughtChunk(_Chunk, frozen=True, tag="agent_thought_chunk"):
    """A piece of the agent's reasoning."""

    kind: ClassVar[UpdateKind] = UpdateKind.AGENT_THOUGHT_CHUNK


class ToolCall(_Update, frozen=True, tag="tool_call"):
    """A tool call the agent starts. ``kind`` and ``title`` are the agent's own claims."""

    kind: ClassVar[UpdateKind] = UpdateKind.TOOL_CALL
    tool_call_id: str
    title: str
    tool_kind: str | None = msgspec.field(default=None, name="kind")
    status: str | None = None
    content: list[Any] | None = None
    locations: list[Any] | None = None
    raw_input: Any = None
    raw_output: Any = None
    name: str | None = None
    """The tool's own name (``Bash``, ``Read``, ``Grep``), when the agent sends it (ACP v1.22 and later)."""


class ToolCallUpdate(_Update, frozen=True, tag="tool_call_update"):
    """A change to a tool call: only the fields set changed (content and locations replace the old lists)."""

    kind: ClassVar[UpdateKind] = UpdateKind.TOOL_CALL_UPDATE
    tool_call_id: str
    title: str | None = None
    tool_kind: str | None = msgspec.field(default=None, name="kind")
    status: str | None = None
    content: list[Any] | None = None
    locations: list[Any] | None = None
    raw_input: Any = None
    raw_output: Any = None
    name: str | None = None
    """The tool's own name, when this update sets it (Codex sends it here, not on the ``tool_call``)."""


class PlanEntry(_In, frozen=True):
    """One step of the agent's plan."""

    content: str
    priority: str = "medium"
    status: str = "pending"


class Plan(_Update, frozen=True, tag="plan"):
    """The agent's whole current plan; it replaces the previous one."""

    kind: ClassVar[UpdateKind] = UpdateKind.PLAN
    entries: list[PlanEntry]


class AvailableCommand(_In, frozen=True):
    """A slash command the agent offers."""

    name: str
    description: str = ""
    input: dict[str, Any] | None = None


class AvailableCommandsUpdate(_Update, frozen=True, tag="available_commands_update"):
    """The commands the agent offers now."""

    kind: ClassVar[UpdateKind] = UpdateKind.AVAILABLE_COMMANDS_UPDATE
    available_commands: list[AvailableCommand]


class CurrentModeUpdate(_Update, frozen=True, tag="current_mode_update"):
    """The session switched mode."""

    kind: ClassVar[UpdateKind] = UpdateKind.CURRENT_MODE_UPDATE
    current_mode_id: str


class ConfigOptionUpdate(_Update, frozen=True, tag="config_option_update"):
    """The complete state of the session's config options."""

    kind: ClassVar[UpdateKind] = UpdateKind.CONFIG_OPTION_UPDATE
    config_options: list[Any]


class SessionInfoUpdate(_Update, frozen=True, tag="session_info_update"):
    """The session's title or update time changed."""

    kind: ClassVar[UpdateKind] = UpdateKind.SESSION_INFO_UPDATE
    title: str | None = None
    updated_at: str | None = None


class Cost(_In, frozen=True):
    """Money spent so far in the session."""

    amount: float
    currency: str


class UsageUpdate(_Update, frozen=True, tag="usage_update"):
    """How much of the context window is used."""

    kind: ClassVar[UpdateKind] = UpdateKind.USAGE_UPDATE
    used: int
    size: int
    cost: Cost | None = None


# The kinds of schema v1.25 and of the SDK 2.4.0 schema. An agent sends them only to a client that opted in
# (:class:`~tinyacp.ClientFeatures`), but they are typed whatever was advertised: a line is what it is.

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class Notice(_Update, frozen=True, tag="notice"):
    """Information for the user that is not part of the conversation: a model fallback, a config warning.

    Agents send it only with ``session.notices`` advertised; otherwise they put the same text into the reply
    (as an ``agent_message_chunk``), which is why :class:`~tinyacp.ClientFeatures` has notices on by default.
    """

    kind: ClassVar[UpdateKind] = UpdateKind.NOTICE
    severity: str
    """``info``, ``warning``, ``error``, or a value of a newer agent, kept as its string."""
    title: NonEmpty
    description: str | None = None


class CompactionUpdate(_Update, frozen=True, tag="compaction_update"):
    """A context compaction started or changed; later updates with the same id patch it."""

    kind: ClassVar[UpdateKind] = UpdateKind.COMPACTION_UPDATE
    compaction_id: str
    status: str
    """``in_progress``, ``completed``, ``failed``, ``cancelled``, or a newer agent's value."""
    summary: list[Any] | None = None
    """The summary's content blocks, as decoded JSON, when this update sets them."""
    error: str | None = None


class CompactionSummaryChunk(_Update, frozen=True, tag="compaction_summary_chunk"):
    """A content block appended to a compaction's summary."""

    kind: ClassVar[UpdateKind] = UpdateKind.COMPACTION_SUMMARY_CHUNK
    compaction_id: str
    content: ContentBlock


class PlanItems(_In, frozen=True, tag_field="type", tag="items"):
    """A plan given as entries."""

    plan_id: str
    entries: list[PlanEntry]


class PlanFile(_In, frozen=True, tag_field="type", tag="file"):
    """A plan kept in a file the agent names."""

    plan_id: str
    uri: str


class PlanMarkdown(_In, frozen=True, tag_field="type", tag="markdown"):
    """A plan given as markdown text."""

    plan_id: str
    content: str


class PlanUpdate(_Update, frozen=True, tag="plan_update"):
    """A plan, identified by its id, was created or replaced (sent instead of ``plan`` with plan operations on)."""

    kind: ClassVar[UpdateKind] = UpdateKind.PLAN_UPDATE
    plan: PlanItems | PlanFile | PlanMarkdown

    @property
    def plan_id(self) -> str:
        """The id of the plan this update replaces."""
        return self.plan.plan_id


class PlanRemoved(_Update, frozen=True, tag="plan_removed"):
    """The plan with this id is gone."""

    kind: ClassVar[UpdateKind] = UpdateKind.PLAN_REMOVED
    plan_id: str


class SubagentUpdate(_Update, frozen=True, tag="subagent_update"):
    """The session it arrives on made, or changed, a child session (a subagent) whose id is ``session_id``.

    Sent on the parent's session before any of the child's own traffic. A field left out keeps its previous
    value (it is ``msgspec.UNSET`` here); ``None`` clears it. :attr:`~tinyacp.PromptResult.subagents` holds the
    merged state of each child announced in a turn.
    """

    kind: ClassVar[UpdateKind] = UpdateKind.SUBAGENT_UPDATE
    session_id: str
    """The child's session id: its updates and permission requests arrive under it."""
    title: str | msgspec.UnsetType | None = msgspec.UNSET
    description: str | msgspec.UnsetType | None = msgspec.UNSET
    capabilities: dict[str, Any] | msgspec.UnsetType | None = msgspec.UNSET
    state: dict[str, Any] | msgspec.UnsetType | None = msgspec.UNSET
    """What the child is doing (``{"state": "running"}``, ``idle``, ``requires_action``, …), as decoded JSON."""
    cwd: str | msgspec.UnsetType | None = msgspec.UNSET
    additional_directories: list[str] | msgspec.UnsetType | None = msgspec.UNSET


class Subagent(msgspec.Struct, frozen=True):
    """A child session announced during a prompt turn, with the latest of what its updates said."""

    session_id: str
    title: str | None = None
    description: str | None = None
    capabilities: dict[str, Any] | None = None
    state: dict[str, Any] | None = None
    cwd: str | None = None
    additional_directories: tuple[str, ...] | None = None


def merged_subagent(previous: Subagent | None, update: SubagentUpdate) -> Subagent:
    """The child's state with ``update`` applied: a field left out keeps its value, None clears it."""
    fields: dict[str, Any] = {} if previous is None else msgspec.structs.asdict(previous)
    fields["session_id"] = update.session_id
    for name in ("title", "description", "capabilities", "state", "cwd", "additional_directories"):
        value = getattr(update, name)
        if value is not msgspec.UNSET:
            fields[name] = tuple(value) if isinstance(value, list) else value
    return Subagent(**fields)


class SessionMessage(_Update, frozen=True, tag="session_message"):
    """A message between two sessions (a parent and its child), or a change to one."""

    kind: ClassVar[UpdateKind] = UpdateKind.SESSION_MESSAGE
    message_id: str
    sender_session_id: str | None = None
    recipient_session_id: str | None = None
    sender_message_id: str | None = None
    recipient_message_id: str | None = None
    content: list[Any] | None = None
    """The message's content blocks, as decoded JSON, when this update sets them."""


class SessionMessageChunk(_Update, frozen=True, tag="session_message_chunk"):
    """A content block appended to a message between sessions."""

    kind: ClassVar[UpdateKind] = UpdateKind.SESSION_MESSAGE_CHUNK
    message_id: str
    content: ContentBlock


class UnknownUpdate(msgspec.Struct, frozen=True):
    """An update we could not type: a kind newer than those of :class:`UpdateKind`, or a known kind whose
    required fields are missing or of the wrong type. (Lists inside an update, such as a tool call's
    ``content``, are kept as decoded JSON and not checked item by item, as the schema's
    ``x-deserialize-skip-invalid-items`` allows.)"""

    kind: ClassVar[UpdateKind] = UpdateKind.UNKNOWN
    session_update: str | None
    """The ``sessionUpdate`` value the agent sent, if it sent a string."""
    fields: dict[str, Any]
    """The update object as decoded JSON."""


TypedUpdate: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCall
    | ToolCallUpdate
    | Plan
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
    | SessionInfoUpdate
    | UsageUpdate
    | Notice
    | CompactionUpdate
    | CompactionSummaryChunk
    | PlanUpdate
    | PlanRemoved
    | SubagentUpdate
    | SessionMessage
    | SessionMessageChunk
)
"""The update kinds tinyacp decodes in one typed pass: every kind of :class:`UpdateKind` but UNKNOWN."""

SessionUpdate: TypeAlias = TypedUpdate | UnknownUpdate


class _UpdateParams(_In, frozen=True):
    session_id: str
    update: TypedUpdate


class UpdateLine(msgspec.Struct, frozen=True, gc=False):
    """The hot path: a whole ``session/update`` line in one typed pass."""

    jsonrpc: Literal["2.0"]
    method: Literal["session/update"]
    params: _UpdateParams


class LooseUpdateParams(_In, frozen=True):
    """A ``session/update`` whose update did not type: keep what can be read."""

    session_id: str
    update: dict[str, Any]


# --------------------------------------------------------------------------------------------------------------
# Permission requests.


class PermissionOption(_In, frozen=True):
    """A choice the agent offers for a permission request."""

    option_id: str
    name: str
    kind: str


class PermissionToolCall(_In, frozen=True):
    """The tool call a permission request is about. ``kind`` and ``title`` are the agent's claims."""

    tool_call_id: str
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    content: list[Any] | None = None
    locations: list[Any] | None = None
    raw_input: Any = None
    name: str | None = None
    """The tool's own name (``Bash``, ``Read``), when the agent sends it: what ``PermissionPolicy(tools=...)``
    matches."""


class PermissionParams(_In, frozen=True):
    """The params of ``session/request_permission``."""

    session_id: str
    tool_call: PermissionToolCall
    options: list[PermissionOption]


# --------------------------------------------------------------------------------------------------------------
# The JSON-RPC envelope for everything that is not a session/update.


class Envelope(msgspec.Struct, frozen=True):
    """Any JSON-RPC message, its parts left raw until we know what it is."""

    jsonrpc: Any = msgspec.UNSET
    id: int | str | msgspec.UnsetType | None = msgspec.UNSET
    method: str | msgspec.UnsetType = msgspec.UNSET
    params: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class ErrorObject(msgspec.Struct, frozen=True, omit_defaults=True):
    """A JSON-RPC error object."""

    code: int
    message: str
    data: Any = None


# --------------------------------------------------------------------------------------------------------------
# What we write.

CLIENT_CAPABILITIES: dict[str, Any] = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
    "session": {"configOptions": {"boolean": {}}},
}
"""No file system, no terminals (agents then run without them); boolean config options are understood."""


class OutRequest(msgspec.Struct, frozen=True):
    """A request we send; ids are ours and numeric."""

    jsonrpc: str
    id: int
    method: str
    params: Any


class OutNotification(msgspec.Struct, frozen=True):
    """A notification we send (``session/cancel``)."""

    jsonrpc: str
    method: str
    params: Any


class OutResult(msgspec.Struct, frozen=True):
    """A success response to the agent's request, echoing its id exactly."""

    jsonrpc: str
    id: int | str | None
    result: Any


class OutError(msgspec.Struct, frozen=True):
    """An error response to the agent's request, echoing its id exactly."""

    jsonrpc: str
    id: int | str | None
    error: ErrorObject


METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002
