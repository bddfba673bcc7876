"""``--file`` and ``--image``: the files given with a prompt, read before the agent starts, and sent as the
richest prompt blocks the agent accepts."""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from ..._files import read_regular
from ..._messages import (
    PromptBlobResource,
    PromptCapabilities,
    PromptContent,
    PromptMedia,
    PromptResourceLink,
    PromptText,
    PromptTextResource,
)
from ..shared._exit import UsageProblem

__all__ = ["Attachment", "prompt_with_attachments", "read_attachment", "read_attachments"]


@dataclass(frozen=True)
class Attachment:
    """A file given with ``--file`` or ``--image``, read before the agent starts."""

    path: Path
    data: bytes
    mime_type: str | None
    image: bool

    @property
    def uri(self) -> str:
        """The file's absolute ``file://`` URI."""
        return self.path.resolve().as_uri()


def prompt_with_attachments(
    text: str, attachments: tuple[Attachment, ...], capabilities: PromptCapabilities
) -> tuple[list[PromptContent], list[str]]:
    """The prompt: the text, then each attachment as the richest block the agent accepts; plus notes for
    attachments sent as a mere link because the agent does not accept them embedded."""
    blocks: list[PromptContent] = [PromptText(text)]
    notes = []
    for item in attachments:
        if item.image and capabilities.image:
            blocks.append(
                PromptMedia.image(base64.b64encode(item.data).decode("ascii"), item.mime_type or "", item.uri)
            )
            continue
        if not item.image and capabilities.embedded_context:
            try:
                blocks.append(PromptTextResource(item.uri, item.data.decode("utf-8"), item.mime_type))
            except UnicodeDecodeError:
                blocks.append(PromptBlobResource(item.uri, base64.b64encode(item.data).decode("ascii"), item.mime_type))
            continue
        what = "images" if item.image else "embedded files"
        notes.append(f"the agent does not accept {what}: {item.path} is sent as a link")
        blocks.append(PromptResourceLink(item.uri, item.path.name, item.mime_type, size=len(item.data)))
    return blocks, notes


def read_attachment(path: str, *, image: bool) -> Attachment:
    """Read a ``--file`` or ``--image`` now, so a missing file is a usage error before anything starts.

    Raises:
        OSError: the file cannot be read, or is not a regular file.
        ValueError: an ``--image`` that is not an image type.
    """
    file = Path(path)
    data = read_regular(file)  # a FIFO or a device is refused, never waited on
    mime_type = mimetypes.guess_type(file.name)[0]
    if image and (mime_type is None or not mime_type.startswith("image/")):
        raise ValueError(f"--image {path}: not an image file (by its name: {mime_type or 'unknown type'})")
    return Attachment(file, data, mime_type, image)


def read_attachments(files: list[str], images: list[str]) -> tuple[Attachment, ...]:
    """Every ``--file``, then every ``--image``, read now.

    Raises:
        UsageProblem: naming the flag and the file that cannot be read, or the ``--image`` that is no image.
    """
    items = []
    for path, image in [(path, False) for path in files] + [(path, True) for path in images]:
        try:
            items.append(read_attachment(path, image=image))
        except OSError as exc:
            raise UsageProblem(f"{'--image' if image else '--file'} {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise UsageProblem(str(exc)) from None
    return tuple(items)
