"""Pictures for tests, made without holding them in memory: a single-colour PNG of any
size written row by row through zlib (a 9400×9400 one is ~370 KB on disk)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def solid_png(
    path: Path, width: int, height: int, rgb: tuple[int, int, int] = (200, 30, 30)
) -> Path:
    row = b"\x00" + bytes(rgb) * width  # filter byte, then the pixels
    packer = zlib.compressobj(6)
    data = bytearray()
    for _ in range(height):
        data += packer.compress(row)
    data += packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", bytes(data))
        + _chunk(b"IEND", b"")
    )
    return path
