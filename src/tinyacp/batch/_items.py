"""The items of a batch: what one turn is asked to do, checked one at a time as it is read.

An item is a JSON object (a dict in Python): ``id`` and ``prompt`` are required, every other field is optional
and falls back on the defaults of the call or the command line. Fields the item carries beyond these are the
caller's own (a repository name, an expected answer) and are ignored.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from .._bounds import check_timeout
from .._errors import BatchItemError
from .._files import open_regular_binary

__all__ = ["Item", "ItemSource", "item_key", "journal_name", "journal_path", "parse_item", "read_items"]

ItemSource = Iterable[Mapping[str, Any]] | str | os.PathLike[str]
"""What ``run_batch`` takes: dicts, or the path of a JSON Lines file of them."""

ConfigValue = str | bool


class Item(msgspec.Struct, frozen=True, kw_only=True):
    """One turn to run. ``None`` means: use the default of the call."""

    id: str | int
    prompt: str
    agent: str | list[str] | None = None
    """An agent's name (optionally followed by more arguments), a command line, or an argv list."""
    cwd: str | None = None
    mode: str | None = None
    model: str | None = None
    set: dict[str, ConfigValue] | None = None
    """Session configuration options: ``{config_id: value}`` (a value id, or a boolean for a switch)."""
    timeout: float | None = None
    """Seconds for the whole turn: start, initialize, new session, settings and prompt."""
    meta: dict[str, Any] | None = None
    """Sent as the prompt's ``_meta``."""
    fork: str | None = None
    """A session to fork before the turn: the turn runs in the fork (``session/fork``, which the agent must
    offer), and the session itself is left as it was. Without it, the turn runs in a new session."""


def parse_item(value: object, *, line: int | None = None) -> Item:
    """Check one item and return it typed.

    Raises:
        BatchItemError: not an object, a required field missing or empty, a field of the wrong type, a
            ``timeout`` that is not a number of seconds from 0 to 1,000,000.
    """
    if not isinstance(value, Mapping):
        raise BatchItemError(f"an item must be a JSON object, not {type(value).__name__}", line=line)
    known = {name: value[name] for name in Item.__struct_fields__ if name in value}
    try:
        item: Item = msgspec.convert(known, Item, strict=True)
    except msgspec.ValidationError as exc:
        where = f" (id {value['id']!r})" if isinstance(value.get("id"), str | int) else ""
        raise BatchItemError(f"item{where}: {exc}", line=line) from None
    if isinstance(item.id, str) and not item.id.strip():
        raise BatchItemError("an item's id must not be empty", line=line)
    if not item.prompt.strip():
        raise BatchItemError(f"item {item.id!r}: the prompt is empty", line=line)
    if item.fork is not None and not item.fork.strip():
        raise BatchItemError(f"item {item.id!r}: fork names no session", line=line)
    try:
        check_timeout("timeout", item.timeout)
    except ValueError as exc:
        raise BatchItemError(f"item {item.id!r}: {exc}", line=line) from None
    if isinstance(item.agent, list) and (not item.agent or not all(isinstance(w, str) for w in item.agent)):
        raise BatchItemError(f"item {item.id!r}: an agent list must be a non-empty argv of strings", line=line)
    return item


def item_key(item_id: str | int) -> str:
    """The id as the text it is known by: ``7`` and ``"7"`` are the same item."""
    return str(item_id)


_decode_line = msgspec.json.Decoder().decode


def read_items(source: ItemSource) -> Iterator[tuple[int | None, object]]:
    """The raw items of ``source``, one at a time, with their line number when read from a file.

    A file is read line by line as the batch asks for the next item, so its size does not matter. Blank lines
    are skipped.

    Raises:
        BatchItemError: a line is not valid JSON, or is nested too deep.
        OSError: the file cannot be read, or is not a regular file (a FIFO is never waited on).
    """
    if isinstance(source, str | os.PathLike):
        yield from _read_file(Path(source))
        return
    if isinstance(source, Mapping):
        raise BatchItemError("items must be an iterable of dicts (or a path), not one dict")
    for value in source:
        yield None, value


_BOMS = ((b"\xef\xbb\xbf", "a UTF-8"), (b"\xff\xfe", "a UTF-16"), (b"\xfe\xff", "a UTF-16"))
"""Byte-order marks an editor may put first: JSON lines are UTF-8 without one (RFC 8259, section 8.1)."""


def _read_file(path: Path) -> Iterator[tuple[int | None, object]]:
    with open_regular_binary(path) as file:
        for number, line in enumerate(file, 1):
            if number == 1:
                _no_bom(path, line)
            if not line.strip():
                continue
            try:
                value = _decode_line(line)
            except msgspec.DecodeError as exc:
                raise BatchItemError(f"{path}: not a JSON object: {exc}", line=number) from None
            except RecursionError:
                raise BatchItemError(f"{path}: not an item: JSON nested too deep", line=number) from None
            yield number, value


def _no_bom(path: Path, line: bytes) -> None:
    """Refuse a file that starts with a byte-order mark, saying so (a JSON decoder only sees a bad first byte).

    Raises:
        BatchItemError: the first line starts with a byte-order mark.
    """
    for mark, what in _BOMS:
        if line.startswith(mark):
            raise BatchItemError(
                f"{path}: starts with {what} byte-order mark ({mark.hex(' ').upper()}): save it as UTF-8 without one",
                line=1,
            )


_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_HASHED = re.compile(r"-[0-9a-f]{16}\.jsonl")
"""How every hashed name ends; a plain name never does, so no plain id takes the name of a hashed one."""


def journal_name(key: str) -> str:
    """The journal's file name for an item key: the key itself when it is a plain file name, else a readable
    part of it and a hash, so no id can reach outside the journal directory or collide with another.

    Two ids never share a name: a plain name is the key itself, a hashed name ends in ``-`` and 16 hex digits (a
    key that ends so is hashed too), and the readable part of a hashed name is followed by a hash of the whole
    key. On a file system that folds case, ``A`` and ``a`` would be one file: a key with a capital is hashed.
    """
    name = key + ".jsonl"
    plain = _SAFE.fullmatch(key) and key == key.lower() and not key.endswith((".", ".jsonl"))
    if plain and not _HASHED.search(name):
        return name
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[:60].strip("._") or "item"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{readable}-{digest}.jsonl"


def journal_path(journal_dir: Path, item_id: str | int) -> Path:
    """Where the journal of the item with this id is kept: its :func:`journal_name` in the batch's journal
    directory (a turn's attempts are its epochs, and a record lost by the engine names it too)."""
    return journal_dir / journal_name(item_key(item_id))
