"""Text from the command line or a terminal, checked before it goes into an ACP message.

Python keeps the bytes of an argument (or of a line typed on a terminal whose input is decoded with
``surrogateescape``) that are not UTF-8 as lone surrogates. No JSON message can carry them, and encoding one
raised ``UnicodeEncodeError`` deep in a run; they are refused here, as the same bytes on stdin are.
"""

from __future__ import annotations

from pathlib import Path

from ._exit import UsageProblem

__all__ = ["text_argument", "utf8_or_escaped", "working_directory"]


def utf8_or_escaped(text: str) -> str:
    """``text`` as it can be printed: bytes that are not UTF-8 (kept by the command line as surrogates) escaped."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return text.encode("utf-8", "backslashreplace").decode("ascii")


def text_argument(what: str, value: str | None, why: str = "ACP sends text as UTF-8") -> None:
    """Refuse text from the command line (or a typed line) that is not UTF-8: Python keeps such bytes as lone
    surrogates, which no JSON message can carry.

    Raises:
        UsageProblem: naming ``what`` and the first byte that is not UTF-8.
    """
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        byte = ord(bad) - 0xDC00 if 0xDC80 <= ord(bad) <= 0xDCFF else None  # how surrogateescape keeps a byte
        where = f"byte 0x{byte:02x} at character {exc.start}" if byte is not None else f"character {exc.start}"
        raise UsageProblem(f"{what} is not UTF-8 text ({where}); {why}") from None


def working_directory(value: str) -> Path:
    """``--cwd`` (``.`` when not given) as the absolute directory the agent is started in and ACP names.

    Raises:
        UsageProblem: the directory cannot be resolved, is not a directory, or its name is not UTF-8 (ACP sends
            the directory as text).
    """
    try:
        cwd = Path(value).resolve()
    except OSError as exc:  # the working directory was removed under us
        raise UsageProblem(f"the working directory cannot be used: {exc.strerror or exc}") from None
    if not cwd.is_dir():
        raise UsageProblem(f"--cwd {utf8_or_escaped(value)}: not a directory")
    what = "--cwd" if value != "." else "the working directory"
    text_argument(f"{what} {utf8_or_escaped(str(cwd))}: its name", str(cwd), "ACP sends the directory as text")
    return cwd
