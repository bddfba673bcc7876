"""The caller's bounds on what crosses the pipe, and the record of a reply that hit one.

Every number below is a default a caller can change. Each is chosen so that an honest agent never meets it while
a runaway one is stopped long before it hurts the process that runs tinyacp.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._bounds import check_count

__all__ = ["Overflow", "OverflowKind", "TransferLimits"]

MiB = 1024 * 1024

# A prompt can carry embedded files and images in base64; 16 MiB holds a large source file set or a few
# screenshots. The line is built whole in memory before it is written, so this also bounds that copy.
DEFAULT_MAX_MESSAGE_BYTES = 16 * MiB
# One update holds at most one tool call's content (a diff, a command's output). 1 MiB keeps a whole large diff
# and stays at half the line reader's default limit (2 MiB), which it may not exceed.
DEFAULT_MAX_UPDATE_BYTES = 1 * MiB
# Real agents stream a reply token by token: tens of thousands of updates in a long session, a few hundred
# thousand in a day-long one. Ten million is far beyond any honest agent yet bounds a flood.
DEFAULT_MAX_UPDATES = 10_000_000
# The reply text is kept in memory; 16 MiB is a book's worth of text, far more than any model writes in one turn.
DEFAULT_MAX_REPLY_BYTES = 16 * MiB
# One chunk per token: a million chunks is several times the largest output window of today's models.
DEFAULT_MAX_REPLY_CHUNKS = 1_000_000
# A notice is a warning for the user (a model fallback, a config problem): real agents send a handful per turn,
# each a line of text. A thousand, or 1 MiB of their text, is far more than a person reads in one turn.
DEFAULT_MAX_NOTICES = 1_000
DEFAULT_MAX_NOTICE_BYTES = 1 * MiB
# A subagent is a child session a turn starts (a search, a review): tens in a busy turn, each described by a
# title and a prompt-sized description. A thousand children, or 1 MiB of what is kept about them, bounds a flood.
DEFAULT_MAX_SUBAGENTS = 1_000
DEFAULT_MAX_SUBAGENT_BYTES = 1 * MiB


@dataclass(frozen=True, slots=True)
class TransferLimits:
    """Bounds on messages, updates and one prompt's reply. Line sizes are in bytes and exclude the newline.

    The first three stop something that should never happen: a request we would write is refused, or the agent
    is torn down. The reply limits are routine: the prompt ends politely and still returns.

    Args:
        max_message_bytes: the longest line we write. A longer request or notification raises
            :class:`~tinyacp.TransferLimitExceeded` before anything is written; the client stays usable.
        max_update_bytes: the longest ``session/update`` line we accept (at most the reader's line limit, else
            the client's constructor raises ValueError). A longer update is recorded with ``on_message`` as
            ``MessageKind.REFUSED_UPDATE`` and not acted on; the call in flight raises
            :class:`~tinyacp.TransferLimitExceeded` (with the update's ``seq``) and the agent is torn down.
        max_updates: how many updates the client accepts over its whole life (all prompts, all sessions). The
            first update past it is refused as above.
        max_reply_bytes: how many bytes of reply text (UTF-8) one prompt keeps. At the first
            ``agent_message_chunk`` that would pass it, the client keeps the whole chunks that fit, sends one
            ``session/cancel``, records every later message of the turn, and returns the agent's final response
            with ``PromptResult.overflow`` set. Every later chunk of that turn is left out too.
        max_reply_chunks: how many ``agent_message_chunk`` updates one prompt keeps; reached as above.
        max_notices: how many ``notice`` updates one prompt keeps in ``PromptResult.notices``. A notice past it
            is left out (the observer still sees it) and counted in ``PromptResult.notices_dropped``; the turn
            goes on.
        max_notice_bytes: how many bytes (UTF-8) of notices one prompt keeps, counting each notice's severity,
            title and description. A notice that would pass it is left out whole, as above.
        max_subagents: how many child sessions (subagents) the client keeps during one prompt: in
            ``PromptResult.subagents``, and as whose child each is. A child past it is left out (the observer
            still sees its updates; its permission requests have no ``parent_session_id``) and its
            announcement counted in ``PromptResult.subagents_dropped``. What is kept is forgotten when the turn
            ends.
        max_subagent_bytes: how many bytes the client keeps about the children of one prompt: each child's id,
            the id of the session that announced it, and, for a child of the prompt's session, its state as
            JSON. An announcement that would pass it is left out, as above (a child keeps its earlier state).

    Each limit is an int of at least 1, with no upper bound: a limit is only compared, so a huge one is safe
    and never reached.

    Raises:
        ValueError: a limit is not a positive int (a bool or a float does not count).
    """

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_update_bytes: int = DEFAULT_MAX_UPDATE_BYTES
    max_updates: int = DEFAULT_MAX_UPDATES
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    max_reply_chunks: int = DEFAULT_MAX_REPLY_CHUNKS
    max_notices: int = DEFAULT_MAX_NOTICES
    max_notice_bytes: int = DEFAULT_MAX_NOTICE_BYTES
    max_subagents: int = DEFAULT_MAX_SUBAGENTS
    max_subagent_bytes: int = DEFAULT_MAX_SUBAGENT_BYTES

    def __post_init__(self) -> None:
        for name in (
            "max_message_bytes",
            "max_update_bytes",
            "max_updates",
            "max_reply_bytes",
            "max_reply_chunks",
            "max_notices",
            "max_notice_bytes",
            "max_subagents",
            "max_subagent_bytes",
        ):
            check_count(name, getattr(self, name))


default_transfer_limits = TransferLimits()


class OverflowKind(enum.StrEnum):
    """Which reply limit a prompt's reply reached."""

    REPLY_BYTES = "reply_bytes"
    REPLY_CHUNKS = "reply_chunks"


@dataclass(frozen=True, slots=True)
class Overflow:
    """A reply that reached a limit: what was kept (whole chunks only) and the first update left out.

    ``kept_bytes`` and ``kept_chunks`` describe ``PromptResult.text``; ``left_out_seq`` is the ``seq`` of the
    first ``agent_message_chunk`` that did not fit (the observer saw it, and every chunk after it).
    """

    kind: OverflowKind
    kept_bytes: int
    kept_chunks: int
    left_out_seq: int
