"""Pictures for the model (Pillow): refuse a corrupt one on arrival, fit the rest to the API.

Images go to the Messages API as base64 blocks (JPEG, PNG, GIF, WebP; at most 5 MB of
base64 and 8000 px a side). Larger ones, or other formats, are downscaled or
re-encoded so that the model still sees them (the original stays in the agent's
``inbox/`` for its Read tool). An image Pillow cannot read is refused when it arrives,
with a one-line reason.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from legio.errors import AttachmentError

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")  # the Messages API's
MAX_IMAGE_BASE64 = 5 * 1024 * 1024
MAX_IMAGE_SIDE = 8000


def check_image(path: Path, name: str) -> None:
    """Raise ``AttachmentError`` if Pillow cannot read the image at ``path``."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:
            image.load()
    except Exception as e:
        raise AttachmentError(
            f"{name} is not a readable image ({type(e).__name__}); "
            "send it again, or as a file if it is not a picture"
        ) from e


def image_source(path: Path) -> dict[str, str]:
    """A base64 image source within the Messages API's limits (downscaled if need be).

    The media type is the one Pillow reads in the bytes, not the one declared: the API
    refuses an image whose type does not match its content.
    """
    from PIL import Image

    data = path.read_bytes()
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        mime_type = Image.MIME.get(image.format or "", "")
        fits = (
            mime_type in IMAGE_TYPES
            and max(width, height) <= MAX_IMAGE_SIDE
            and len(data) * 4 / 3 <= MAX_IMAGE_BASE64
        )
        if fits:
            return {"type": "base64", "media_type": mime_type, "data": _b64(data)}
        image.load()
        picture = image.convert("RGBA" if _has_alpha(image) else "RGB")
    side = min(MAX_IMAGE_SIDE, max(width, height))
    while True:
        copy = picture.copy()
        copy.thumbnail((side, side))
        buffer = io.BytesIO()
        if copy.mode == "RGBA":
            copy.save(buffer, format="PNG", optimize=True)
            media = "image/png"
        else:
            copy.save(buffer, format="JPEG", quality=85)
            media = "image/jpeg"
        encoded = buffer.getvalue()
        if len(encoded) * 4 / 3 <= MAX_IMAGE_BASE64 or side <= 256:
            return {"type": "base64", "media_type": media, "data": _b64(encoded)}
        side = int(side * 0.7)


def _has_alpha(image: Any) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or (
        image.mode == "P" and "transparency" in image.info
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
