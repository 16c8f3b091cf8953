"""What an image in a request costs, from its pixel dimensions (never from the base64 length).

The providers bill an image by its size after their own resizing, not by its bytes: a 1 MB
screenshot is ~1.3M base64 characters (~250k tokens if read as text) but ~1.6k tokens on Claude.

* Anthropic (vision docs): an image whose long edge is over 1568 px, or that would cost over
  ~1,600 tokens, is scaled down (aspect ratio kept) until it fits both; it then costs
  ``width * height / 750`` tokens.
* OpenAI (``detail: "high"`` or ``"auto"``, gpt-4o family): scaled to fit in 2048 x 2048, then so
  that its short side is at most 768 px; it costs 85 tokens plus 170 per 512 x 512 tile that
  covers it. ``detail: "low"``: 85 tokens.

Width and height are read from the file's header with the standard library only: PNG (IHDR),
GIF (logical screen), JPEG (the first SOF marker), WebP (VP8, VP8L, VP8X). An image we cannot
read (a URL source, an unknown format) is charged the provider's ceiling, and said so.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct

from needle_action.core.dataformats import JSON

ANTHROPIC_MAX_EDGE = 1568
ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_MAX_TOKENS = 1600  # the docs' "~1,600 tokens" ceiling (1.2 MP at 750 px per token)
OPENAI_BASE = 85
OPENAI_PER_TILE = 170
OPENAI_TILE = 512
OPENAI_FIT = 2048
OPENAI_SHORT_SIDE = 768
# the most an image can cost after resizing: 768 x 2048 is 2 x 4 tiles
OPENAI_MAX_TOKENS = OPENAI_BASE + OPENAI_PER_TILE * 8


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, JPEG or WebP header; None when unreadable."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    return None


# SOF markers carry the frame size; C4 (DHT), C8 (JPG) and CC (DAC) share the range but do not
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if marker in _SOF and i + 9 <= len(data):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    return None


def decode_base64_head(data: str, nbytes: int = 64 * 1024) -> bytes:
    """The first NBYTES of base64 DATA, decoded (headers sit at the start; a JPEG's SOF may follow
    large EXIF blocks, hence 64 KiB)."""
    head = data[: (nbytes * 4) // 3 + 4]
    head = head[: len(head) - len(head) % 4]
    try:
        return base64.b64decode(head, validate=False)
    except (binascii.Error, ValueError):
        return b""


def anthropic_image_tokens(width: int, height: int) -> int:
    """Claude's cost of a WIDTH x HEIGHT image after the API's resizing."""
    if width <= 0 or height <= 0:
        return 0
    scale = min(1.0, ANTHROPIC_MAX_EDGE / max(width, height))
    max_pixels = ANTHROPIC_MAX_TOKENS * ANTHROPIC_PIXELS_PER_TOKEN
    scale = min(scale, math.sqrt(max_pixels / (width * height)))
    w, h = max(1, int(width * scale)), max(1, int(height * scale))
    return math.ceil(w * h / ANTHROPIC_PIXELS_PER_TOKEN)


def openai_image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """gpt-4o's cost of a WIDTH x HEIGHT image with DETAIL after the API's resizing."""
    if detail == "low":
        return OPENAI_BASE
    w, h = float(width), float(height)
    if max(w, h) > OPENAI_FIT:
        s = OPENAI_FIT / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > OPENAI_SHORT_SIDE:
        s = OPENAI_SHORT_SIDE / min(w, h)
        w, h = w * s, h * s
    tiles = math.ceil(int(w) / OPENAI_TILE) * math.ceil(int(h) / OPENAI_TILE)
    return OPENAI_BASE + OPENAI_PER_TILE * tiles


def image_block_size(block: JSON) -> tuple[int, int] | None:
    """(width, height) of an Anthropic ``image`` block or an OpenAI ``image_url`` part with base64
    data; None for a URL or an unreadable image."""
    if block.get("type") == "image":
        source = block.get("source") or {}
        data = source.get("data") if source.get("type") == "base64" else None
    else:
        url = str((block.get("image_url") or {}).get("url", ""))
        data = url.split(",", 1)[1] if url.startswith("data:") and "," in url else None
    if not isinstance(data, str):
        return None
    return image_size(decode_base64_head(data))
