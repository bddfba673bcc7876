"""The whole ACP v1 client in the pure core: authentication, sessions across processes, configuration, metadata
and usage, driven with scripted agent bytes and no process (fed whole and one byte at a time).

Each test checks what the core writes (against the schema, ``_meta`` included), what it refuses before writing
anything, what is recorded in which order, and what the call gets back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from helpers.core import Driver, make_core, result, update
from helpers.schema import UNSTABLE, check_client_line, errors
from tinyacp import (
    AuthMethod,
    AuthRequired,
    ConfigOption,
    Cost,
    LoadedSession,
    NotAdvertised,
    OutgoingMessage,
    PromptResult,
    RequestError,
    Secret,
    Session,
    SessionNotFound,
    SessionPage,
    SessionState,
    SystemPrompt,
    TurnUsage,
    UsageError,
)
from tinyacp._conversation import MAX_STRAY_SESSIONS

pytestmark = pytest.mark.core  # the first layer: no process, no I/O (`pytest -m core`)

SESSION = "s1"
AUTH_METHODS: list[dict[str, Any]] = [
    {"id": "agent-login", "name": "Log in"},
    {"id": "api-key", "name": "API key", "description": "from the environment"},
    {"id": "tui-login", "name": "Log in in a terminal", "type": "terminal", "args": ["--login"]},
]
EVERYTHING: dict[str, Any] = {
    "protocolVersion": 1,
    "agentCapabilities": {
        "loadSession": True,
        "sessionCapabilities": {
            "list": {},
            "resume": {},
            "close": {},
            "delete": {},
            "additionalDirectories": {},
            "systemPrompt": {"mode": {"override": {}}},
        },
        "auth": {"logout": {}},
    },
    "authMethods": AUTH_METHODS,
}
NOTHING: dict[str, Any] = {"protocolVersion": 1, "authMethods": AUTH_METHODS}
MODES = {
    "currentModeId": "ask",
    "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code", "description": "edits"}],
}
MODEL_OPTION = {
    "id": "model",
    "name": "Model",
    "category": "model",
    "type": "select",
    "currentValue": "small",
    "options": [
        {"value": "small", "name": "Small"},
        {"group": "big", "name": "Big ones", "options": [{"value": "large", "name": "Large"}]},
    ],
}
BOOLEAN_OPTION = {"id": "fast", "name": "Fast", "type": "boolean", "currentValue": False}
ODD_OPTION = {"id": "dial", "name": "Dial", "type": "slider", "currentValue": 3}
SESSION_ANSWER: dict[str, Any] = {
    "sessionId": SESSION,
    "modes": MODES,
    "configOptions": [MODEL_OPTION, BOOLEAN_OPTION, ODD_OPTION, {"name": "no id"}],
}


def opened(piece: int | None, init: dict[str, Any] = EVERYTHING, answer: dict[str, Any] | None = None) -> Driver:
    """A driver whose core is initialized with ``init`` and has session s1 open; events cleared."""
    driver = Driver(make_core(), piece)
    driver.send(driver.core.initialize().message)
    driver.feed(result(0, init))
    driver.send(driver.core.new_session("/work").message)
    driver.feed(result(1, answer or SESSION_ANSWER))
    driver.events.clear()
    driver.done.clear()
    return driver


def call(driver: Driver, message: OutgoingMessage, answer: Any, *lines: bytes) -> object:
    """Send ``message``, feed ``lines`` then the answer to it; return what the call got."""
    driver.send(message)
    for raw in lines:
        driver.feed(raw)
    driver.feed(result(message.id, answer))
    (value,) = driver.done
    driver.done.clear()
    return value


def fail(driver: Driver, message: OutgoingMessage, code: int, text: str) -> RequestError:
    driver.send(message)
    error = {"jsonrpc": "2.0", "id": message.id, "error": {"code": code, "message": text}}
    with pytest.raises(RequestError) as caught:
        driver.feed(msgspec.json.encode(error) + b"\n")
    driver.core.end_call()
    return caught.value


def sent(message: OutgoingMessage, part: str) -> dict[str, Any]:
    """The line's params, after checking the line against the schema."""
    params: dict[str, Any] = check_client_line(message.raw, part)["params"]
    return params


# -- what is written -------------------------------------------------------------------------------------------


def test_every_new_request_fits_the_schema_with_its_meta(piece: int | None) -> None:
    core = opened(piece).core
    meta = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x": [1, None]}
    lines = {
        "AuthenticateRequest": core.authenticate("agent-login", meta).message,
        "LogoutRequest": core.logout().message,
        "LoadSessionRequest": core.load_session(SESSION, "/work", meta=meta, additional_directories=["/lib"]).message,
        "ResumeSessionRequest": core.resume_session(SESSION, "/work", meta=meta).message,
        "CloseSessionRequest": core.close_session(SESSION).message,
        "DeleteSessionRequest": core.delete_session(SESSION).message,
        "ListSessionsRequest": core.list_sessions("/work", "page-2").message,
        "SetSessionModeRequest": core.set_mode(SESSION, "code", meta=meta).message,
        "SetSessionConfigOptionRequest": core.set_config_option(SESSION, "model", "large", meta=meta).message,
        "PromptRequest": core.prompt(SESSION, "hi", meta).message,
        "NewSessionRequest": core.new_session("/work", meta=meta, system_prompt=SystemPrompt("Be brief.")).message,
    }
    for part, message in lines.items():
        params = sent(message, part)
        if part in {"LogoutRequest", "CloseSessionRequest", "DeleteSessionRequest", "ListSessionsRequest"}:
            assert "_meta" not in params
        else:
            assert params["_meta"] == meta, part
    assert sent(lines["LoadSessionRequest"], "LoadSessionRequest") == {
        "sessionId": SESSION,
        "cwd": "/work",
        "mcpServers": [],
        "additionalDirectories": ["/lib"],
        "_meta": meta,
    }
    assert sent(lines["ListSessionsRequest"], "ListSessionsRequest") == {"cwd": "/work", "cursor": "page-2"}
    assert sent(lines["NewSessionRequest"], "NewSessionRequest")["systemPrompt"] == {
        "mode": "append",
        "content": [{"type": "text", "text": "Be brief."}],
    }
    boolean = core.set_config_option(SESSION, "fast", True).message
    assert sent(boolean, "SetSessionConfigOptionRequest") == {
        "sessionId": SESSION,
        "configId": "fast",
        "type": "boolean",
        "value": True,
    }
    initialize = make_core().initialize({"traceparent": "t"}).message
    assert sent(initialize, "InitializeRequest")["_meta"] == {"traceparent": "t"}


def test_the_model_goes_through_the_model_config_option_when_the_session_has_one(piece: int | None) -> None:
    driver = opened(piece)
    message = driver.core.set_model(SESSION, "large").message
    assert message.method == "session/set_config_option"
    assert sent(message, "SetSessionConfigOptionRequest") == {
        "sessionId": SESSION,
        "configId": "model",
        "value": "large",
    }
    chosen = {**MODEL_OPTION, "currentValue": "large"}
    assert call(driver, message, {"configOptions": [chosen]}) is None
    option = driver.core.session_state(SESSION).model_option()
    assert option is not None
    assert option.current_value == "large"


def test_the_legacy_set_model_is_sent_only_for_a_model_the_session_listed(piece: int | None) -> None:
    models = {
        "currentModelId": "flash",
        "availableModels": [{"modelId": "flash", "name": "Flash"}, {"modelId": "pro", "name": "Pro"}],
    }
    driver = opened(piece, answer={"sessionId": SESSION, "models": models})
    with pytest.raises(NotAdvertised, match="opus"):
        driver.core.set_model(SESSION, "opus")
    message = driver.core.set_model(SESSION, "pro").message
    line = check_client_line(message.raw, "ExtRequest")
    assert (line["method"], line["params"]) == ("session/set_model", {"sessionId": SESSION, "modelId": "pro"})
    assert call(driver, message, {}) is None
    state = driver.core.session_state(SESSION)
    assert state.models is not None
    assert state.models.current_model_id == "pro"


def test_a_secret_is_written_plain_and_named_on_the_outgoing_message() -> None:
    core = opened(None).core
    key = Secret("sk-live-123")
    message = core.authenticate("api-key", {"api-key": key, "nested": [key, Secret("other")]}).message
    params = sent(message, "AuthenticateRequest")
    assert params == {"methodId": "api-key", "_meta": {"api-key": "sk-live-123", "nested": ["sk-live-123", "other"]}}
    assert message.secrets == (key, Secret("other"))
    assert b"sk-live-123" not in message.redacted()
    assert b"other" not in message.redacted()
    assert msgspec.json.decode(message.redacted())["params"]["_meta"] == {
        "api-key": "<secret>",
        "nested": ["<secret>", "<secret>"],
    }
    assert "sk-live" not in repr(key)
    assert core.logout().message.secrets == ()


# -- refused before writing ------------------------------------------------------------------------------------


def test_calls_the_agent_did_not_advertise_are_refused_and_nothing_is_written(piece: int | None) -> None:
    driver = opened(piece, init=NOTHING)
    core = driver.core
    refused: list[Callable[[], object]] = [
        lambda: core.load_session(SESSION, "/work").message,
        lambda: core.resume_session(SESSION, "/work").message,
        lambda: core.close_session(SESSION).message,
        lambda: core.delete_session(SESSION).message,
        core.list_sessions,
        core.logout,
        lambda: core.authenticate("no-such-method").message,
        lambda: core.authenticate("tui-login").message,
        lambda: core.set_mode(SESSION, "yolo").message,
        lambda: core.set_config_option(SESSION, "no-such-option", "x").message,
        lambda: core.set_config_option(SESSION, "model", "huge").message,
        lambda: core.set_config_option(SESSION, "model", True).message,
        lambda: core.set_config_option(SESSION, "fast", "yes").message,
        lambda: core.set_config_option(SESSION, "dial", "4").message,
        lambda: core.set_model(SESSION, "huge").message,
        lambda: core.new_session("/work", system_prompt=SystemPrompt("x")).message,
        lambda: core.new_session("/work", additional_directories=["/lib"]).message,
    ]
    for build in refused:
        with pytest.raises(NotAdvertised, match="nothing was written"):
            build()
    assert driver.events == []
    assert core.authenticate("agent-login").message.id == 2  # no id was used up by a refusal


@pytest.mark.parametrize(
    "advertised",
    [{}, {"override": {}}, {"mode": {}}, {"mode": {"override": None}}, {"mode": "override"}],
    ids=["append-only", "override-outside-mode", "mode-without-override", "override-null", "mode-not-an-object"],
)
def test_an_override_system_prompt_needs_the_mode_override_sub_capability(advertised: dict[str, Any]) -> None:
    init = {**EVERYTHING, "agentCapabilities": {"sessionCapabilities": {"systemPrompt": advertised}}}
    core = opened(None, init=init).core
    with pytest.raises(NotAdvertised, match=r"systemPrompt\.mode\.override"):
        core.new_session("/work", system_prompt=SystemPrompt("x", mode="override"))
    assert sent(core.new_session("/work", system_prompt=SystemPrompt("x")).message, "NewSessionRequest")["systemPrompt"]


def test_an_override_system_prompt_is_sent_when_the_agent_offers_mode_override() -> None:
    init = {**EVERYTHING, "agentCapabilities": {"sessionCapabilities": {"systemPrompt": {"mode": {"override": {}}}}}}
    core = opened(None, init=init).core
    message = core.new_session("/work", system_prompt=SystemPrompt("Be terse.", mode="override")).message
    params = check_client_line(message.raw, "NewSessionRequest", UNSTABLE)["params"]
    assert params["systemPrompt"] == {"mode": "override", "content": [{"type": "text", "text": "Be terse."}]}


def test_nothing_is_advertised_before_initialize() -> None:
    core = make_core()
    with pytest.raises(NotAdvertised, match="initialize"):
        core.authenticate("agent-login")
    with pytest.raises(NotAdvertised, match="initialize"):
        core.list_sessions()


def test_force_sends_an_unlisted_mode_and_marks_the_line_forced(piece: int | None) -> None:
    driver = opened(piece, answer={"sessionId": SESSION})  # OpenCode lists no modes, yet accepts set_mode
    message = driver.core.set_mode(SESSION, "build", force=True).message
    assert message.forced
    assert sent(message, "SetSessionModeRequest") == {"sessionId": SESSION, "modeId": "build"}
    assert call(driver, message, {}) is None
    assert driver.names() == ["on_send", "write", "on_message"]
    modes = driver.core.session_state(SESSION).modes
    assert modes is not None
    assert modes.current_mode_id == "build"
    with pytest.raises(NotAdvertised):  # the current mode, yet still listed nowhere
        driver.core.set_mode(SESSION, "build")


def test_bad_arguments_are_type_and_value_errors() -> None:
    core = opened(None).core
    with pytest.raises(TypeError, match="meta"):
        core.prompt(SESSION, "x", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config value"):
        core.set_config_option(SESSION, "dial", 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="absolute"):
        core.resume_session(SESSION, "relative/dir")
    with pytest.raises(ValueError, match="absolute"):
        core.list_sessions("relative")
    with pytest.raises(TypeError, match="non-empty str"):
        Secret("")
    with pytest.raises(ValueError, match="override"):
        SystemPrompt("x", mode="replace")  # type: ignore[arg-type]


# -- answers ---------------------------------------------------------------------------------------------------


def test_a_session_answer_is_typed_and_an_option_of_an_unknown_type_is_kept(piece: int | None) -> None:
    driver = Driver(make_core(), piece)
    driver.send(driver.core.initialize().message)
    driver.feed(result(0, EVERYTHING))
    driver.done.clear()
    session = call(driver, driver.core.new_session("/work").message, SESSION_ANSWER)
    assert isinstance(session, Session)
    assert session.modes is not None
    assert [mode.id for mode in session.modes.available_modes] == ["ask", "code"]
    assert [option.id for option in session.config_options] == ["model", "fast", "dial"]  # the unreadable one left out
    model, fast, dial = session.config_options
    assert (model.category, model.type, model.current_value, model.values) == (
        "model",
        "select",
        "small",
        ("small", "large"),
    )
    assert (fast.type, fast.current_value) == ("boolean", False)
    assert (dial.type, dial.current_value) == ("slider", 3)
    state = driver.core.session_state(SESSION)
    assert (state.modes, state.config_options) == (session.modes, session.config_options)


def test_an_agent_naming_endless_sessions_leaves_only_the_latest_few_and_the_open_ones_state(
    piece: int | None,
) -> None:
    driver = opened(piece)
    core = driver.core
    init = [{"name": "init", "description": "d"}]
    commands = {"sessionUpdate": "available_commands_update", "availableCommands": init}
    driver.feed(update({"sessionUpdate": "current_mode_update", "currentModeId": "code"}))
    for number in range(5_000):
        driver.feed(update(commands, session=f"stray-{number}"))
    assert len(driver.events) == 5_001  # every update was recorded
    state = core.session_state(SESSION)  # the session this client opened keeps its state
    assert state.modes is not None and state.modes.current_mode_id == "code"
    kept = [f"stray-{number}" for number in range(5_000 - MAX_STRAY_SESSIONS, 5_000)]
    assert [core.session_state(stray).available_commands[0].name for stray in kept] == ["init"] * MAX_STRAY_SESSIONS
    with pytest.raises(UsageError, match="stray-0"):
        core.session_state("stray-0")
    # A session's updates that came before the answer opening it are kept when it opens, and it is no stray then.
    driver.feed(update(commands, session="s2"))
    session = call(driver, core.new_session("/work").message, {"sessionId": "s2"})
    assert isinstance(session, Session)
    assert [command.name for command in core.session_state("s2").available_commands] == ["init"]
    for number in range(100):
        driver.feed(update(commands, session=f"later-{number}"))
    assert [command.name for command in core.session_state("s2").available_commands] == ["init"]


def test_mode_option_and_command_updates_change_the_state_only_once_recorded(piece: int | None) -> None:
    driver = opened(piece)
    core = driver.core
    before = core.session_state(SESSION)
    updates: list[dict[str, Any]] = [
        {"sessionUpdate": "current_mode_update", "currentModeId": "code"},
        {"sessionUpdate": "config_option_update", "configOptions": [BOOLEAN_OPTION]},
        {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "init", "description": "d"}]},
    ]
    for fields in updates:
        received = core.receive(update(fields)[:-1])
        assert core.session_state(SESSION) is before or core.session_state(SESSION) == before
        before = core.session_state(SESSION)
        core.update_recorded(received)  # type: ignore[arg-type]
        assert core.session_state(SESSION) != before
        before = core.session_state(SESSION)
    state = core.session_state(SESSION)
    assert state.modes is not None
    assert state.modes.current_mode_id == "code"
    assert [mode.id for mode in state.modes.available_modes] == ["ask", "code"]
    assert [option.id for option in state.config_options] == ["fast"]
    assert [command.name for command in state.available_commands] == ["init"]


def test_set_config_option_returns_every_option_and_keeps_them(piece: int | None) -> None:
    driver = opened(piece)
    options = call(
        driver,
        driver.core.set_config_option(SESSION, "fast", True).message,
        {"configOptions": [{**BOOLEAN_OPTION, "currentValue": True}]},
    )
    assert isinstance(options, tuple)
    assert all(isinstance(option, ConfigOption) for option in options)
    assert [(o.id, o.current_value) for o in options] == [("fast", True)]
    assert driver.core.session_state(SESSION).config_options == options


def test_a_load_counts_the_replayed_updates_and_keeps_the_commands_sent_before_the_answer(piece: int | None) -> None:
    driver = opened(piece)
    replay = [
        update({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}, "old"),
        update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hello"}}, "old"),
        update(
            {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "x", "description": ""}]},
            "old",
        ),
        update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "elsewhere"}}, "s1"),
    ]
    loaded = call(driver, driver.core.load_session("old", "/work").message, {"modes": MODES}, *replay)
    assert isinstance(loaded, LoadedSession)
    assert (loaded.session.id, loaded.replayed_updates) == ("old", 3)
    assert driver.names() == ["on_send", "write", "on_update", "on_update", "on_update", "on_update", "on_message"]
    state = driver.core.session_state("old")
    assert [command.name for command in state.available_commands] == ["x"]
    assert state.modes == loaded.session.modes


def test_a_resume_answer_has_no_session_id_and_gets_the_one_asked_for(piece: int | None) -> None:
    driver = opened(piece)
    session = call(driver, driver.core.resume_session("old", "/work").message, {})
    assert isinstance(session, Session)
    assert (session.id, session.modes, session.config_options) == ("old", None, ())
    assert driver.core.session_state("old") == SessionState("old")


def test_a_session_list_page_skips_unreadable_entries(piece: int | None) -> None:
    driver = opened(piece)
    answer = {
        "sessions": [
            {"sessionId": "a", "cwd": "/w", "title": "First", "updatedAt": "2026-01-01T00:00:00Z"},
            {"cwd": "/w"},
            {"sessionId": "b", "cwd": "/w", "_meta": {"k": 1}},
        ],
        "nextCursor": "c2",
    }
    page = call(driver, driver.core.list_sessions().message, answer)
    assert isinstance(page, SessionPage)
    assert [(s.session_id, s.cwd, s.title, s.updated_at) for s in page.sessions] == [
        ("a", "/w", "First", "2026-01-01T00:00:00Z"),
        ("b", "/w", None, None),
    ]
    assert page.next_cursor == "c2"
    assert errors("ListSessionsResponse", answer) != []  # the schema says skip it; we did


def test_close_forgets_the_session_state(piece: int | None) -> None:
    driver = opened(piece)
    assert call(driver, driver.core.close_session(SESSION).message, {}) is None
    with pytest.raises(UsageError, match="no session"):
        driver.core.session_state(SESSION)


def test_authentication_required_carries_the_offered_methods_and_the_core_goes_on(piece: int | None) -> None:
    driver = Driver(make_core(), piece)
    driver.send(driver.core.initialize().message)
    driver.feed(result(0, EVERYTHING))
    driver.done.clear()
    error = fail(driver, driver.core.new_session("/work").message, -32000, "Authentication required")
    assert isinstance(error, AuthRequired)
    assert [method.id for method in error.auth_methods] == ["agent-login", "api-key", "tui-login"]
    assert all(isinstance(method, AuthMethod) for method in error.auth_methods)
    assert (error.method, error.code) == ("session/new", -32000)
    assert call(driver, driver.core.authenticate("api-key").message, {}) is None
    assert isinstance(call(driver, driver.core.new_session("/work").message, {"sessionId": "s2"}), Session)


def test_an_unknown_session_is_session_not_found_and_the_core_goes_on(piece: int | None) -> None:
    driver = opened(piece)
    error = fail(driver, driver.core.load_session("gone", "/work").message, -32002, "Resource not found")
    assert isinstance(error, SessionNotFound)
    assert error.method == "session/load"
    other = fail(driver, driver.core.resume_session("gone", "/work").message, -32603, "Internal error")
    assert type(other) is RequestError
    assert call(driver, driver.core.resume_session(SESSION, "/work").message, {}) is not None


# -- usage -----------------------------------------------------------------------------------------------------


def test_usage_comes_from_the_answer_and_the_turns_last_usage_update(piece: int | None) -> None:
    driver = opened(piece)
    first = update({"sessionUpdate": "usage_update", "used": 10, "size": 1000})
    last = update(
        {"sessionUpdate": "usage_update", "used": 53, "size": 1000, "cost": {"amount": 0.25, "currency": "USD"}}
    )
    other = update({"sessionUpdate": "usage_update", "used": 99, "size": 99}, "elsewhere")
    answer = {
        "stopReason": "end_turn",
        "usage": {"inputTokens": 40, "outputTokens": 13, "totalTokens": 53},
        "_meta": {"q": 1},
    }
    outcome = call(driver, driver.core.prompt(SESSION, "hi").message, answer, first, last, other)
    assert isinstance(outcome, PromptResult)
    assert outcome.usage == TurnUsage(
        input_tokens=40, output_tokens=13, total_tokens=53, context_used=53, context_size=1000, cost=Cost(0.25, "USD")
    )
    assert outcome.meta == {"_meta": {"q": 1}}


def test_a_turn_without_usage_has_none_and_an_unreadable_usage_stays_in_meta(piece: int | None) -> None:
    driver = opened(piece)
    plain = call(driver, driver.core.prompt(SESSION, "hi").message, {"stopReason": "end_turn"})
    assert isinstance(plain, PromptResult)
    assert (plain.usage, plain.meta) == (None, None)
    odd = call(
        driver, driver.core.prompt(SESSION, "hi").message, {"stopReason": "end_turn", "usage": {"inputTokens": "many"}}
    )
    assert isinstance(odd, PromptResult)
    assert (odd.usage, odd.meta) == (None, {"usage": {"inputTokens": "many"}})
