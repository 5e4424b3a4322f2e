"""What one instruction sends Claude Code: its text, and images as content blocks of the same user message.

Streaming input takes a user message whose ``content`` is a list of Messages-API blocks, so a screenshot
goes with its instruction as ``{"type": "image", "source": {"type": "base64", ...}}``. The media type is
read from the bytes, never taken from the sender: the API refuses an image whose declared type is wrong.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.errors import SessionError

__all__ = [
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "ImageInput",
    "image_type",
    "load_images",
    "user_message",
    "user_messages",
]

logger = logging.getLogger(__name__)

# The Messages API takes images of up to 5 MB (after base64, about 3.75 MB of bytes) and at most 20 a request.
MAX_IMAGE_BYTES = 3_750_000
MAX_IMAGES = 20


@dataclass(frozen=True, slots=True)
class ImageInput:
    """An image to show the model with an instruction. Build with :meth:`of` (checks type and size)."""

    media_type: str
    data: bytes

    @classmethod
    def of(cls, data: bytes) -> ImageInput:
        kind = image_type(data)
        if kind is None:
            raise SessionError("not an image the model can read (JPEG, PNG, GIF or WebP)")
        if len(data) > MAX_IMAGE_BYTES:
            raise SessionError(f"image of {len(data)} bytes is over the model's {MAX_IMAGE_BYTES} byte limit")
        return cls(kind, data)


def image_type(data: bytes) -> str | None:
    """The media type the bytes are (by their signature), when the model reads it; else None."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def load_images(paths: Sequence[str | Path]) -> list[ImageInput]:
    """The images at ``paths``; one gone, unreadable or not a model-readable image is left out (logged).

    Blocking: call it in a worker thread.
    """
    images: list[ImageInput] = []
    for path in paths:
        try:
            images.append(ImageInput.of(Path(path).read_bytes()))
        except (OSError, SessionError) as exc:
            logger.warning("image %s left out: %s", path, exc)
    return images


def user_message(text: str, images: Sequence[ImageInput] = ()) -> dict[str, Any]:
    """The SDK's streaming-input user message: the text block first, then each image."""
    if len(images) > MAX_IMAGES:
        raise SessionError(f"{len(images)} images in one instruction; the model takes at most {MAX_IMAGES}")
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for image in images:
        data = base64.b64encode(image.data).decode("ascii")
        content.append({"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": data}})
    return {"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": None}


async def user_messages(text: str, images: Sequence[ImageInput]) -> AsyncIterator[dict[str, Any]]:
    """The one-message stream ``ClaudeSDKClient.query`` takes when an instruction carries images."""
    yield user_message(text, images)
