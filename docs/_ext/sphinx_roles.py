"""A griffe extension for the API reference: the docstrings' Sphinx roles as links.

The docstrings name other objects as Sphinx does (``:class:`~tinyacp.Client```, ``:meth:`AsyncClient.prompt```),
which Python's ``help()`` and the command's ``--help`` show as plain names (``tinyacp._roles.plain``). Here each
role becomes a mkdocstrings cross-reference (``[`Client`][tinyacp.Client]``) when the page documents its target:
a dotted name as written, else a name relative to the object's class, module or the public packages. A role whose
target the site does not document (a private helper, a builtin) becomes the name in code style, never raw text.
"""

from __future__ import annotations

from typing import Any

import griffe

from tinyacp._roles import ROLE, shown

_PAGES = ("tinyacp", "tinyacp.reader", "tinyacp.batch", "tinyacp.replay")
"""The modules the API reference renders with all their public names (tinyacp.view shows only a few: its roles
stay code)."""


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring of the package once it is loaded (after ``SharedCalls``)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != "tinyacp":
            return
        public = _public_paths(pkg)
        documented = set(public.values())
        for obj in _objects(pkg):
            if obj.docstring is not None:
                obj.docstring.value = _linked(obj.docstring.value, obj, public, documented)


def _objects(module: griffe.Module) -> list[griffe.Object]:
    """Every object defined in the package (aliases are documented where their target is)."""
    found: list[griffe.Object] = []
    stack: list[griffe.Object] = [module]
    while stack:
        obj = stack.pop()
        found.append(obj)
        stack.extend(member for member in obj.members.values() if not member.is_alias)
    return found


def _public_paths(pkg: griffe.Module) -> dict[str, str]:
    """The path each documented object has on the site, by its canonical path (``tinyacp._client.Client`` ->
    ``tinyacp.Client``), for the public names of the rendered modules and the public members of their classes."""
    paths: dict[str, str] = {}
    for page in _PAGES:
        module = pkg if page == "tinyacp" else pkg[page.split(".", 1)[1]]
        names = module.exports if module.exports is not None else [n for n in module.members if not n.startswith("_")]
        for name in names:
            member = module.members.get(str(name))
            if member is None:
                continue
            try:
                target = member.final_target if member.is_alias else member
            except griffe.AliasResolutionError:
                continue
            paths[target.path] = f"{page}.{name}"
            for attribute in target.members:
                if not attribute.startswith("_"):
                    paths[f"{target.path}.{attribute}"] = f"{page}.{name}.{attribute}"
    return paths


def _linked(text: str, obj: griffe.Object, public: dict[str, str], documented: set[str]) -> str:
    scopes = [scope.path for scope in (obj, obj.parent, obj.module) if scope is not None]

    def replace(match: Any) -> str:
        tilde, target = match[1], match[2]
        name = shown(tilde, target)
        for candidate in (target, *(f"{scope}.{target}" for scope in scopes), *(f"{p}.{target}" for p in _PAGES)):
            path = candidate if candidate in documented else public.get(candidate)
            if path is not None:
                return f"[`{name}`][{path}]"
        return f"`{name}`"

    return ROLE.sub(replace, text)
