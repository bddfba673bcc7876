"""``with-bash``: the turn's tool call is ``Bash`` (kind execute, ``ls -l <cwd>``), asked for even in mode ``auto``.
Nothing is run: the agent lists the files itself, as ``Read`` does. Tool names need no opt-in."""

from __future__ import annotations

from ._tools import use_tool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._agent import DemoAgent
    from ._tools import Listing
    from ._turn import Turn


def work(agent: DemoAgent, turn: Turn) -> Listing | None:
    """The ``Bash`` tool call in the turn's session, in place of ``Read``."""
    return use_tool(agent, turn, turn.session.session_id, "Bash")
