"""Old runs as traces: a journal, or a batch's directory, sent as the spans a live run makes, at the recorded times.

The spans are those of :mod:`tinyacp.otel._spans`, fed with the journal's records instead of the observer's calls,
and their ids are derived from the journal, so the same journal always gives the same spans:

* the trace id is the first 16 bytes of ``sha256("tinyacp-trace\\0" + the journal's first line)`` (for a batch:
  of ``results.jsonl``'s first line): the first record holds the time the journal was begun, so two journals
  never share it, and appending to a journal keeps it;
* each span id is the first 8 bytes of ``sha256(trace id + "\\0" + where it is)``, where it is names the journal,
  the epoch and the span's place among the epoch's spans (``journal``, ``turn:3``, ``run.jsonl#2/request:4``).

A journal is one trace: a ``journal {name}`` span over its epochs, each epoch an ``agent process`` span as a live
run makes it. A batch's directory is one trace: ``batch {name}``, one ``turn {id}`` span per record of
``results.jsonl``, each over the epoch of its journal that the attempt was.
"""

from __future__ import annotations

import datetime
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import msgspec
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanKind

from .._errors import UsageError
from .._files import open_regular_binary
from .._journal import iter_journal
from ._sink import OtelSink
from ._spans import Attributes, SpanModel, cut

__all__ = ["export_batch", "export_journal", "journal_trace_id"]

_PREFIX: Final = b"tinyacp-trace\0"
_MAX_QUEUE: Final = 1 << 16
"""Spans of one export waiting to go out, at most: a journal of more tool calls than this loses the rest."""
_decode = msgspec.json.Decoder().decode


class _KeyedIds(IdGenerator):
    """The ids the exporter chose before each span starts (random ones if it chose none)."""

    def __init__(self) -> None:
        self.trace_id: int | None = None
        self.span_id: int | None = None
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        found, self.trace_id = self.trace_id, None
        return found if found is not None else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        found, self.span_id = self.span_id, None
        return found if found is not None else self._random.generate_span_id()


class _KeyedSink(OtelSink):
    """An :class:`OtelSink` whose span ids are derived from the trace id and where each span is."""

    def __init__(self, tracer: trace.Tracer, root: Any, ids: _KeyedIds, trace_id: bytes, where: str) -> None:
        super().__init__(tracer, root)
        self._ids = ids
        self._trace_id = trace_id
        self._where = where

    def start(self, key: str, name: str, parent: str | None, ts: int, attributes: Attributes, *, client: bool) -> None:
        self._ids.span_id = _span_id(self._trace_id, f"{self._where}/{key}")
        super().start(key, name, parent, ts, attributes, client=client)


def _span_id(trace_id: bytes, where: str) -> int:
    return int.from_bytes(hashlib.sha256(trace_id + b"\0" + where.encode()).digest()[:8], "big") or 1


def _first_line(path: Path) -> bytes:
    with path.open("rb") as file:
        return file.readline().rstrip(b"\n")


def journal_trace_id(path: str | os.PathLike[str]) -> str:
    """The trace id :func:`export_journal` gives ``path``'s spans (32 hex characters).

    Raises:
        OSError: the file cannot be read.
    """
    return hashlib.sha256(_PREFIX + _first_line(Path(path))).digest()[:16].hex()


def _ns(record: dict[str, Any], last: int) -> int:
    stamp = record.get("ts")
    if isinstance(stamp, str):
        try:
            moment = datetime.datetime.fromisoformat(stamp)
        except ValueError:
            return last
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        return int(moment.timestamp() * 1_000_000) * 1000
    return last


class _Exporter:
    """One trace: a provider whose ids the exporter chooses, and its root span."""

    def __init__(self, exporter: SpanExporter, trace_id: bytes, service_name: str) -> None:
        self.ids = _KeyedIds()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}), id_generator=self.ids)
        self.provider.add_span_processor(
            BatchSpanProcessor(exporter, max_queue_size=1 << 16, schedule_delay_millis=200)
        )
        self.tracer = self.provider.get_tracer("tinyacp.export")
        self.trace_id = trace_id

    def span(self, where: str, name: str, parent: Any, ts: int, attributes: Attributes) -> trace.Span:
        self.ids.span_id = _span_id(self.trace_id, where)
        if parent is None:
            self.ids.trace_id = int.from_bytes(self.trace_id, "big")
        context = None if parent is None else trace.set_span_in_context(parent)
        return self.tracer.start_span(
            name, context=context, kind=SpanKind.INTERNAL, attributes=attributes, start_time=ts
        )

    def close(self) -> None:
        self.provider.force_flush()
        self.provider.shutdown()


def _epochs(
    out: _Exporter, path: Path, where: str, parent: trace.Span, *, capture: bool, only: int | None = None
) -> tuple[int, int]:
    """Send the spans of ``path``'s epochs (only epoch ``only`` when given) under ``parent``: the first and last
    times seen (0, 0: none)."""
    model: SpanModel | None = None
    first = last = 0
    epoch: int | None = None
    root = trace.set_span_in_context(parent)
    for line in iter_journal(path):
        record = line.record
        if record is None:
            continue
        ts = _ns(record, last)
        if record.get("type") == "epoch":
            if model is not None:
                model.finish(last, {})
            epoch = record.get("epoch") if isinstance(record.get("epoch"), int) else None
            model = None
            if only is not None and epoch != only:
                continue
            sink = _KeyedSink(out.tracer, root, out.ids, out.trace_id, f"{where}#{epoch}")
            model = SpanModel(sink, capture_content=capture)
            model.begin(ts, {"tinyacp.epoch": epoch or 0})
            first = first or ts
        if model is None:
            continue
        last = max(last, ts)
        _feed(model, record, ts, capture)
    if model is not None:
        model.finish(last, {})
    return first, last


def _feed(model: SpanModel, record: dict[str, Any], ts: int, capture: bool) -> None:
    if record.get("type") == "decision":
        outcome = record.get("outcome")
        model.decision(
            ts, record.get("id"), str(record.get("decided_by") or ""), outcome if isinstance(outcome, dict) else {}
        )
        return
    if record.get("type") != "line" or not isinstance(record.get("line"), str):
        return
    try:
        message = _decode(record["line"])
    except (msgspec.DecodeError, RecursionError):  # a line that is not JSON, or nested past msgspec's depth
        return
    if not isinstance(message, dict):
        return
    if record.get("dir") == "out":
        model.sent(ts, message)
    elif record.get("kind") == "update":
        params = message.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict):
            return
        kind = str(update.get("sessionUpdate", ""))
        found = None if kind == "agent_message_chunk" and not capture else update
        model.update(ts, str(params.get("sessionId", "")) if isinstance(params, dict) else "", kind, found)
    else:
        model.received(ts, message)


def _check(path: Path, what: str) -> None:
    if not path.is_file():
        raise UsageError(f"{path}: no such {what}")


def export_journal(
    path: str | os.PathLike[str],
    exporter: SpanExporter,
    *,
    capture_content: bool = False,
    service_name: str = "tinyacp",
) -> str:
    """Send the spans of a journal to ``exporter``, at the recorded times, with ids derived from the journal.

    Args:
        path: a journal (:class:`~tinyacp.JsonlJournal`'s file).
        exporter: where the spans go (an OTLP exporter, say); it is shut down at the end.
        capture_content: put the prompt's and the reply's text in the turns' spans (off by default).
        service_name: the ``service.name`` of the spans' resource.

    Returns:
        The trace's id (32 hex characters).

    Raises:
        UsageError: ``path`` is not a file.
        OSError: it cannot be read.
    """
    source = Path(path)
    _check(source, "journal")
    trace_id = bytes.fromhex(journal_trace_id(source))
    out = _Exporter(exporter, trace_id, service_name)
    try:
        first, last = _times(source)
        attributes: Attributes = {"tinyacp.journal": cut(source.name)}
        live = _live_trace_id(source)
        if live:
            attributes["tinyacp.live_trace_id"] = live
        root = out.span("journal", f"journal {cut(source.name, 100)}", None, first, attributes)
        _epochs(out, source, source.name, root, capture=capture_content)
        root.end(end_time=last)
    finally:
        out.close()
    return trace_id.hex()


def export_batch(
    directory: str | os.PathLike[str],
    exporter: SpanExporter,
    *,
    capture_content: bool = False,
    service_name: str = "tinyacp",
) -> str:
    """Send the spans of a batch's directory: ``batch {name}``, one ``turn {id}`` per record of
    ``results.jsonl``, each over the epoch of the turn's journal that the attempt was.

    Args:
        directory: the batch's output directory (``results.jsonl`` and ``journals/``).
        exporter: where the spans go; it is shut down at the end.
        capture_content: put the prompts' and the replies' text in the turns' spans (off by default).
        service_name: the ``service.name`` of the spans' resource.

    Returns:
        The trace's id (32 hex characters).

    Raises:
        UsageError: the directory has no ``results.jsonl``.
        OSError: a file cannot be read.
    """
    base = Path(directory)
    results = base / "results.jsonl"
    _check(results, "batch directory (no results.jsonl)")
    trace_id = bytes.fromhex(journal_trace_id(results))
    out = _Exporter(exporter, trace_id, service_name)
    try:
        records = _results(results)
        spans = [(record, _journal_of(base, record.journal)) for record in records]
        times = [_times(path) for _, path in spans if path is not None]
        first = min((t[0] for t in times if t[0]), default=0)
        last = max((t[1] for t in times), default=first)
        root = out.span("batch", f"batch {cut(base.resolve().name, 100)}", None, first, {"tinyacp.turns": len(records)})
        for number, (record, path) in enumerate(spans):
            _turn(out, root, number, record, path, capture=capture_content)
        root.end(end_time=last)
    finally:
        out.close()
    return trace_id.hex()


class _Error(msgspec.Struct):
    type: str = "Error"
    message: str = ""


class _Record(msgspec.Struct):
    """What the spans of a batch need of a record of ``results.jsonl``."""

    id: str | int
    ok: bool = False
    stop_reason: str | None = None
    journal: str = ""
    epoch: int | None = None
    attempt: int = 1
    error: _Error | None = None


def _results(path: Path) -> list[_Record]:
    """The readable records of a results file, in order (a torn or unreadable line is left out)."""
    decode = msgspec.json.Decoder(_Record).decode
    found = []
    with open_regular_binary(path) as file:
        for line in file:
            if not line.endswith(b"\n"):
                break  # a torn tail
            try:
                found.append(decode(line))
            except (msgspec.DecodeError, RecursionError):
                continue
    return found


def _turn(out: _Exporter, root: trace.Span, number: int, record: _Record, path: Path | None, *, capture: bool) -> None:
    where = f"turn:{number}"
    attributes: Attributes = {
        "tinyacp.item.id": cut(str(record.id)),
        "tinyacp.attempt": record.attempt,
        "tinyacp.ok": bool(record.ok),
    }
    if record.stop_reason:
        attributes["tinyacp.stop_reason"] = cut(record.stop_reason)
    first, last = _times(path, record.epoch) if path is not None else (0, 0)
    span = out.span(where, f"turn {cut(str(record.id), 100)}", root, first, attributes)
    if path is not None and record.epoch is not None:
        _epochs(out, path, f"{where}/{path.name}", span, capture=capture, only=record.epoch)
    if record.error is not None:
        span.set_attribute("error.type", cut(record.error.type, 100))
        span.set_status(trace.Status(trace.StatusCode.ERROR, cut(record.error.message)))
    span.end(end_time=last or first)


def _journal_of(base: Path, name: str) -> Path | None:
    if not name:
        return None
    path = Path(name)
    path = path if path.is_absolute() else base / path
    return path if path.is_file() else None


def _times(path: Path, only: int | None = None) -> tuple[int, int]:
    """The first and last recorded times of a journal (of epoch ``only``), in ns since the epoch."""
    first = last = 0
    epoch = None
    for line in iter_journal(path):
        record = line.record
        if record is None:
            continue
        if record.get("type") == "epoch":
            epoch = record.get("epoch")
        if only is not None and epoch != only:
            continue
        ts = _ns(record, last)
        first = first or ts
        last = max(last, ts)
    return first, last


def _live_trace_id(path: Path) -> str | None:
    for line in _head(path):
        found = line.get("trace_id") if isinstance(line, dict) else None
        return found if isinstance(found, str) and len(found) == 32 else None
    return None


def _head(path: Path) -> Iterable[Any]:
    for line in iter_journal(path):
        yield line.record
        return
