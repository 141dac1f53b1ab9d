"""Pictures for the model (Pillow): refuse a corrupt one on arrival, fit the rest to the API.

Images go to the Messages API as base64 blocks (JPEG, PNG, GIF, WebP; at most 5 MB of
base64 and 8000 px a side). Larger ones, or other formats, are downscaled or
re-encoded so that the model still sees them (the original stays in the agent's
``inbox/`` for its Read tool). An image Pillow cannot read is refused when it arrives,
with a one-line reason.
"""

from __future__ import annotations

import base64
import contextlib
import io
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from legio.errors import AttachmentError

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")  # the Messages API's
MAX_IMAGE_BASE64 = 5 * 1024 * 1024
MAX_IMAGE_SIDE = 8000


MODEL_SIDE = 1568  # a picture that must shrink shrinks to this: the API scales larger ones down
MAX_PIXELS = 50_000_000  # larger pictures reach the model as files only (memory: ~200 MB)


class PictureTooLarge(AttachmentError):
    """A picture over ``MAX_PIXELS``: the model gets it as a file, not as an image."""


def _header(image: Any, name: str) -> tuple[int, int]:
    """The picture's size as its header says, refused above ``MAX_PIXELS`` before any
    decoding (Pillow's own decompression-bomb check stands behind this one)."""
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise PictureTooLarge(
            f"{name} is too large to show as a picture ({width}×{height} px, over "
            f"{MAX_PIXELS // 1_000_000} megapixels); it is delivered as a file"
        )
    return width, height


@contextlib.contextmanager
def _opened(path: Path, name: str) -> Iterator[Any]:
    """The picture at ``path``, opened (header only); Pillow's decompression-bomb warning
    or error is ``PictureTooLarge`` too."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(path)
        except (Image.DecompressionBombWarning, Image.DecompressionBombError) as e:
            raise PictureTooLarge(
                f"{name} is too large to show as a picture ({e}); it is delivered as a file"
            ) from e
    with image:
        yield image


def check_image(path: Path, name: str) -> None:
    """Raise ``AttachmentError`` if Pillow cannot read the image at ``path``. A picture
    too large to decode safely (``MAX_PIXELS``) is not decoded here: it is kept, and the
    model gets it as a file (``image_source`` says why)."""

    try:
        with _opened(path, name) as image:
            _header(image, name)
            image.verify()
        with _opened(path, name) as image:
            image.draft("RGB", (1024, 1024))  # a JPEG decodes at a fraction of its size
            image.load()
    except PictureTooLarge:
        return
    except Exception as e:
        raise AttachmentError(
            f"{name} is not a readable image ({type(e).__name__}); "
            "send it again, or as a file if it is not a picture"
        ) from e


def image_source(path: Path, name: str = "") -> dict[str, str]:
    """A base64 image source within the Messages API's limits (downscaled if need be).

    The media type is the one Pillow reads in the bytes, not the one declared: the API
    refuses an image whose type does not match its content. The size is read from the
    header first (``PictureTooLarge`` above ``MAX_PIXELS``); a picture that must shrink
    is reduced while it is decoded (``draft`` for a JPEG, ``thumbnail`` with a reducing
    gap), never copied at full size.
    """
    from PIL import Image

    with _opened(path, name or path.name) as image:
        width, height = _header(image, name or path.name)
        mime_type = Image.MIME.get(image.format or "", "")
        size = path.stat().st_size
        fits = (
            mime_type in IMAGE_TYPES
            and max(width, height) <= MAX_IMAGE_SIDE
            and size * 4 / 3 <= MAX_IMAGE_BASE64
        )
        if fits:
            return {"type": "base64", "media_type": mime_type, "data": _b64(path.read_bytes())}
        side = min(MODEL_SIDE, max(width, height))
        image.draft("RGB", (side, side))
        image.thumbnail((side, side), reducing_gap=2.0)
        picture = image.convert("RGBA" if _has_alpha(image) else "RGB")
    while True:
        picture.thumbnail((side, side), reducing_gap=2.0)
        buffer = io.BytesIO()
        if picture.mode == "RGBA":
            picture.save(buffer, format="PNG", optimize=True)
            media = "image/png"
        else:
            picture.save(buffer, format="JPEG", quality=85)
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
