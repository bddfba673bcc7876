"""Cross-references in docstrings, written as Sphinx roles (``:class:`~tinyacp.Client```), as plain text.

The docstrings name other objects with Sphinx roles. The documentation site turns them into links (a griffe
extension beside the docs does it); anywhere else a docstring is shown to a person, ``--help`` for one, the role
is noise: :func:`plain` leaves the name alone.
"""

from __future__ import annotations

import re

__all__ = ["ROLE", "plain"]

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|exc|data|obj|const):`(~?)([^`<>]+?)`")
"""A role: group 1 is ``~`` when only the last part of the name is shown, group 2 the dotted name."""


def plain(text: str) -> str:
    """``text`` with each role replaced by the name it shows: ``:class:`~tinyacp.Client``` becomes ``Client``."""
    return ROLE.sub(lambda match: shown(match[1], match[2]), text)


def shown(tilde: str, target: str) -> str:
    """The name a role shows: the last part of ``target`` after ``~``, else all of it."""
    return target.rsplit(".", 1)[-1] if tilde else target
