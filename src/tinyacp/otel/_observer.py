"""The tracing observer: spans of what the client hands the observer, then every call handed on."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Final

from ._spans import KINDS_READ, PROCESS, SpanModel, cut

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .._elicitation import ElicitationReply, ElicitationRequest
    from .._observer import Observer
    from .._permissions import PermissionReply, PermissionRequest
    from .._records import AgentMessage, OutgoingMessage, Update
    from .._serve import ServeRequest
    from .._trace_context import TraceContext

__all__ = ["CAPTURE_CONTENT_ENV", "TracingObserver", "export_batch", "export_journal"]

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The variable OpenTelemetry's GenAI instrumentations read: ``true`` captures the prompt and the reply."""

_log = logging.getLogger("tinyacp.otel")

_SCOPE: Final = "tinyacp"


def capture_from_env() -> bool:
    """Whether :data:`CAPTURE_CONTENT_ENV` asks for content (``true``, any case)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"


class TracingObserver:
    """An observer that makes spans of what it records, then hands every call on to ``observer``.

    Args:
        observer: the caller's observer (a :class:`~tinyacp.JsonlJournal`, say): it gets every call as it
            would without tracing, and its answers (a permission reply, an awaitable) are the client's.
        tracer_provider: where the spans go (None: OpenTelemetry's global provider).
        agent_name: ``gen_ai.agent.name`` and the name of ``invoke_agent {agent}`` (None: what the agent
            calls itself in ``initialize``).
        capture_content: put the prompt's and the reply's text in the turn's span (``gen_ai.input.messages``,
            ``gen_ai.output.messages``). None: as :data:`CAPTURE_CONTENT_ENV` says, which is off unless it is
            ``true``. A :class:`~tinyacp.Secret` is never captured: lines are redacted first.
        parent: the trace the process's span joins (None: the span current where the client is made, if any).

    One observer serves one client: the process's span starts when the client starts the agent and ends when
    the client is closed. A failure of OpenTelemetry's (an exporter, a processor) never fails the run: it is
    logged once on the ``tinyacp.otel`` logger and tracing stops for this client.

    Raises:
        ImportError: the OpenTelemetry API is not installed (``pip install "tinyacp[otel]"``).
    """

    def __init__(
        self,
        observer: Observer,
        *,
        tracer_provider: TracerProvider | None = None,
        agent_name: str | None = None,
        capture_content: bool | None = None,
        parent: TraceContext | None = None,
    ) -> None:
        from opentelemetry import trace

        from ._sink import OtelSink, root_context

        tracer = trace.get_tracer(_SCOPE, _version(), tracer_provider=tracer_provider)
        self.observer = observer
        self._sink = OtelSink(tracer, root_context(parent))
        capture = capture_from_env() if capture_content is None else capture_content
        self._model = SpanModel(self._sink, agent_name=agent_name, capture_content=capture)
        self._capture = capture
        self._read = frozenset(KINDS_READ | ({"agent_message_chunk"} if capture else set()))
        """The update kinds decoded: those that make a span, an event or an attribute."""
        self._lock = threading.Lock()
        self._broken = False
        self._started = False
        self._decode: Any = None
        self.trace_id: str | None = None
        """The trace's id (32 hex characters) once the agent was started."""

    # ----------------------------------------------------------------------------------------------------------
    # What the client calls besides the observer's methods (:mod:`tinyacp._trace_context`).

    def trace_process(self, command: Sequence[str] = ()) -> TraceContext | None:
        """The agent is about to start: the process's span, whose context its environment carries."""
        from .._trace_context import TraceContext

        attributes: dict[str, Any] = {}
        if command:
            attributes["process.executable.name"] = cut(os.path.basename(command[0]))
        with self._lock:
            if self._started:
                return None
            self._started = True
            self._safely(self._model.begin, time.time_ns(), attributes)
            self.trace_id = self._sink.trace_id(PROCESS)
            return TraceContext.from_carrier(self._sink.carrier(PROCESS))

    def trace_request(self, method: str) -> dict[str, str] | None:
        """A request is about to be built: its span, whose context its ``_meta`` carries."""
        with self._lock:
            if self._broken:
                return None
            try:
                key = self._model.open_request(time.time_ns(), method)
                return self._sink.carrier(key)
            except Exception as exc:
                self._fail(exc)
                return None

    def trace_exit(self, returncode: int | None, failure: BaseException | None = None) -> None:
        """The agent is gone (the client closed, or tore it down after ``failure``): every span ends."""
        attributes: dict[str, Any] = {}
        if returncode is not None:
            attributes["process.exit.code"] = returncode
        error = None if failure is None else (type(failure).__name__, cut(str(failure)))
        with self._lock:
            self._safely(self._model.finish, time.time_ns(), attributes, error)

    # ----------------------------------------------------------------------------------------------------------
    # The observer's methods: record, then hand on.

    def on_update(self, update: Update) -> Awaitable[None] | None:
        """Count the update (a tool call, a usage, a notice… also makes a span or an event), then hand it on."""
        kind = str(update.kind)
        if kind not in self._read:  # a thought, a plan, a reply chunk not captured: only counted
            with self._lock:
                self._safely(self._model.update, time.time_ns(), update.session_id, kind, None)
        else:
            message = self._decoded(update.raw)
            params = message.get("params") if isinstance(message, dict) else None
            inner = params.get("update") if isinstance(params, dict) else None
            with self._lock:
                found = inner if isinstance(inner, dict) else None
                self._safely(self._model.update, time.time_ns(), update.session_id, kind, found)
        return self.observer.on_update(update)

    def on_permission_request(
        self, request: PermissionRequest
    ) -> PermissionReply | Awaitable[PermissionReply | None] | None:
        """Remember which tool call asks, then hand it on (the observer's reply decides it)."""
        self._received(request.raw)
        return self.observer.on_permission_request(request)

    def on_permission_decision(self, request: PermissionRequest) -> Awaitable[None] | None:
        """An event on the tool call's span: who decided and which option; then hand it on."""
        with self._lock:
            self._safely(
                self._model.decision,
                time.time_ns(),
                request.request_id,
                str(request.decided_by or ""),
                request.outcome,
            )
        return self.observer.on_permission_decision(request)

    def on_message(self, message: AgentMessage) -> Awaitable[None] | None:
        """A response ends its request's span; then hand it on."""
        self._received(message.raw)
        method = getattr(self.observer, "on_message", None)
        return method(message) if callable(method) else None

    def on_send(self, message: OutgoingMessage) -> Awaitable[None] | None:
        """A request of ours (its span started when it was built), a cancel (an event); then hand it on."""
        decoded = self._decoded(message.redacted())
        if isinstance(decoded, dict):
            with self._lock:
                self._safely(self._model.sent, time.time_ns(), decoded)
        method = getattr(self.observer, "on_send", None)
        return method(message) if callable(method) else None

    def on_elicitation(
        self, request: ElicitationRequest
    ) -> ElicitationReply | Awaitable[ElicitationReply | None] | None:
        """Handed on (declined when the observer has no ``on_elicitation``)."""
        method = getattr(self.observer, "on_elicitation", None)
        return method(request) if callable(method) else None

    def on_serve(self, request: ServeRequest) -> bool | Awaitable[bool | None] | None:
        """Handed on (left to the rules when the observer has no ``on_serve``)."""
        method = getattr(self.observer, "on_serve", None)
        return method(request) if callable(method) else None

    def on_serve_decision(self, request: ServeRequest) -> Awaitable[None] | None:
        """Handed on."""
        method = getattr(self.observer, "on_serve_decision", None)
        return method(request) if callable(method) else None

    def flush(self) -> Awaitable[None] | None:
        """The observer's flush point, handed on."""
        method = getattr(self.observer, "flush", None)
        return method() if callable(method) else None

    # ----------------------------------------------------------------------------------------------------------

    def _received(self, raw: bytes) -> None:
        message = self._decoded(raw)
        if isinstance(message, dict):
            with self._lock:
                self._safely(self._model.received, time.time_ns(), message)

    def _decoded(self, raw: bytes) -> Any:
        if self._decode is None:
            import msgspec

            self._decode = msgspec.json.Decoder().decode
        try:
            return self._decode(raw)
        except Exception:
            return None

    def _safely(self, step: Any, *args: Any) -> None:
        if self._broken:
            return
        try:
            step(*args)
        except Exception as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        self._broken = True
        _log.warning("tracing stopped for this client: %s: %s", type(exc).__name__, exc)


def _version() -> str:
    from .._version import __version__

    return __version__


def export_journal(
    path: str | os.PathLike[str], exporter: Any, *, capture_content: bool = False, service_name: str = "tinyacp"
) -> str:
    """Send a journal's spans to ``exporter`` (an OpenTelemetry ``SpanExporter``), at the recorded times, with
    ids derived from the journal: the same journal always gives the same spans (docs/traces.md says how).

    Returns:
        The trace's id (32 hex characters).

    Raises:
        UsageError: ``path`` is not a file.
        OSError: it cannot be read.
    """
    from ._export import export_journal as export

    return export(path, exporter, capture_content=capture_content, service_name=service_name)


def export_batch(
    directory: str | os.PathLike[str], exporter: Any, *, capture_content: bool = False, service_name: str = "tinyacp"
) -> str:
    """Send a batch directory's spans to ``exporter``: ``batch {name}``, a ``turn {id}`` span per record of its
    ``results.jsonl`` over that attempt's spans, ids derived from the files (docs/traces.md).

    Returns:
        The trace's id (32 hex characters).

    Raises:
        UsageError: the directory has no ``results.jsonl``.
        OSError: a file cannot be read.
    """
    from ._export import export_batch as export

    return export(directory, exporter, capture_content=capture_content, service_name=service_name)
