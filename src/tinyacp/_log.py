"""The library's loggers: ``tinyacp`` and its children, silent unless the program configures logging.

``tinyacp.process`` logs the agent's process (started, stopped, reaped, a group that needed SIGKILL),
``tinyacp.client`` the calls (each request and its answer at DEBUG; deadlines, cancels, failures, closes at INFO),
``tinyacp.permissions`` each permission decision (INFO). Nothing logs an update, a line's content, the agent's
arguments or environment, or a :class:`~tinyacp.Secret`: methods, ids, session ids, tool titles and outcomes only.

The ``tinyacp`` logger gets a :class:`logging.NullHandler`, as the logging HOWTO advises libraries: without any
handler, Python's last resort would print a WARNING to stderr of a program that never asked for logs.
"""

from __future__ import annotations

import logging
from typing import Final

__all__ = ["CLIENT", "PERMISSIONS", "PROCESS"]

logging.getLogger("tinyacp").addHandler(logging.NullHandler())

CLIENT: Final = logging.getLogger("tinyacp.client")
PROCESS: Final = logging.getLogger("tinyacp.process")
PERMISSIONS: Final = logging.getLogger("tinyacp.permissions")
