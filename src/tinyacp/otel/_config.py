"""Whether and where to export spans: a light value (no OpenTelemetry import), shipped to a batch's workers.

The command and a batch export when asked with an endpoint (``--otel-endpoint``, ``TraceExport(endpoint=...)``)
or when OpenTelemetry's standard variables say so: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT`` set, or ``OTEL_TRACES_EXPORTER`` naming an exporter (``otlp``, ``console``);
never when ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["TraceExport", "export_wanted"]

_ENDPOINTS: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


@dataclass(frozen=True, slots=True)
class TraceExport:
    """Where a run's spans go: OTLP over HTTP to ``endpoint``, else as the standard variables say.

    Args:
        endpoint: the OTLP/HTTP base URL (``http://127.0.0.1:4318``; ``/v1/traces`` is added unless the URL
            ends with it), as ``OTEL_EXPORTER_OTLP_ENDPOINT``; None: the standard variables.
        capture_content: put the prompts' and the replies' text in the spans (``gen_ai.input.messages``,
            ``gen_ai.output.messages``); None: as ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says
            (off unless ``true``).
        parent: the W3C ``traceparent`` the run's spans join (a batch sets its own span's for its turns).
        service_name: ``service.name`` unless ``OTEL_SERVICE_NAME`` says otherwise.

    Raises:
        ValueError: an endpoint that is not an http(s) URL.
    """

    endpoint: str | None = None
    capture_content: bool | None = None
    parent: str | None = None
    service_name: str = "tinyacp"

    def __post_init__(self) -> None:
        if self.endpoint is not None and not self.endpoint.startswith(("http://", "https://")):
            raise ValueError(f"the OTLP endpoint must be an http:// or https:// URL, not {self.endpoint!r}")

    @property
    def traces_url(self) -> str | None:
        """The URL spans are posted to (None: the exporter reads the standard variables)."""
        if self.endpoint is None:
            return None
        base = self.endpoint.rstrip("/")
        return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


def export_wanted(endpoint: str | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Whether spans are to be exported: an endpoint given, or the standard variables ask for it (and the SDK
    is not disabled)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return endpoint is not None or bool(exporter) or any(env.get(name, "").strip() for name in _ENDPOINTS)
