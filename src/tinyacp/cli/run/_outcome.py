"""How a run of ``tinyacp prompt`` (or a turn of ``tinyacp chat``) ended: its exit status and the usage the agent
reported, as values and as the words of the ``done`` line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._messages import StopReason, TurnUsage, UsageUpdate
from ..._records import PromptResult
from ..shared._display import one_line
from ..shared._exit import Exit

__all__ = ["Outcome", "outcome_of_result", "usage_words"]


@dataclass
class Outcome:
    """How the run ended."""

    code: int
    result: PromptResult | None = None
    error: str | None = None
    error_type: str | None = None
    hint: str | None = None
    error_data: Any = None
    """The ``data`` of the agent's error answer, as the agent sent it."""
    advice: tuple[str, ...] = ()
    """What to do about the error (the hint lines without the agent's stderr): the JSON result's ``error.hint``."""


def outcome_of_result(result: PromptResult) -> Outcome:
    """The outcome of a turn the agent answered: its exit status by how it ended."""
    reason = str(result.stop_reason)
    if result.timed_out:
        code = Exit.TIMEOUT
    elif result.overflow is not None:
        code = Exit.LIMIT
    elif reason == StopReason.END_TURN:
        code = Exit.OK
    elif reason == StopReason.REFUSAL:
        code = Exit.REFUSAL
    elif reason == StopReason.CANCELLED:
        code = Exit.CANCELLED
    else:
        code = Exit.INCOMPLETE
    return Outcome(int(code), result)


def usage_words(usage: TurnUsage | None, update: UsageUpdate | None) -> list[str]:
    """The ``done`` line's words for tokens and cost, when the agent reported them."""
    words = []
    if usage is not None:
        tokens = ((usage.input_tokens, "in"), (usage.output_tokens, "out"), (usage.thought_tokens, "thought"))
        counts = [f"{value:,} {label}" for value, label in tokens if value is not None]
        if counts:
            words.append("tokens " + ", ".join(counts))
        elif usage.total_tokens is not None:
            words.append(f"{usage.total_tokens:,} tokens")
    if update is not None and update.size > 0:
        words.append(f"context {100 * update.used // update.size}%")
    if update is not None and update.cost is not None:
        amount, currency = update.cost.amount, one_line(update.cost.currency, 8)
        words.append(f"cost ${amount:.4f}" if currency == "USD" else f"cost {amount:.4f} {currency}")
    return words
