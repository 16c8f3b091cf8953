"""Image sizes from file headers, and what the providers bill for them."""

from __future__ import annotations

import base64
import struct

import pytest

from needle_action.tokens.images import (
    anthropic_image_tokens,
    decode_base64_head,
    image_block_size,
    image_size,
    openai_image_tokens,
)


def png(w: int, h: int) -> bytes:
    return (
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", w, h) + b"\x08\x02\0\0\0"
    )


def gif(w: int, h: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", w, h) + b"\0" * 8


def jpeg(w: int, h: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0" + b"\0" * 9
    exif = b"\xff\xe1" + struct.pack(">H", 2 + 3000) + b"x" * 3000  # a large block before the frame
    sof = b"\xff\xc2" + struct.pack(">HBHH", 17, 8, h, w) + b"\x03" + b"\0" * 9
    return b"\xff\xd8" + app0 + exif + sof + b"\xff\xda"


def webp(chunk: bytes, payload: bytes) -> bytes:
    body = b"WEBP" + chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_sizes_from_each_format_header():
    assert image_size(png(1920, 1080)) == (1920, 1080)
    assert image_size(gif(320, 200)) == (320, 200)
    assert image_size(jpeg(4032, 3024)) == (4032, 3024)
    vp8 = b"\0\0\0" + b"\x9d\x01\x2a" + struct.pack("<HH", 640, 480) + b"\0" * 4
    assert image_size(webp(b"VP8 ", vp8)) == (640, 480)
    bits = (800 - 1) | ((600 - 1) << 14)
    assert image_size(webp(b"VP8L", b"\x2f" + bits.to_bytes(4, "little"))) == (800, 600)
    vp8x = b"\0" * 4 + (1999).to_bytes(3, "little") + (999).to_bytes(3, "little")
    assert image_size(webp(b"VP8X", vp8x)) == (2000, 1000)


@pytest.mark.parametrize("data", [b"", b"not an image", b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n"])
def test_unreadable_headers_give_none(data):
    assert image_size(data) is None


def test_anthropic_cost_is_pixels_over_750_after_resizing():
    assert anthropic_image_tokens(200, 200) == 54  # the vision docs' table: ~54 tokens
    assert anthropic_image_tokens(1000, 1000) == 1334  # ~1,334
    # a 4K screenshot is scaled down to the ~1,600-token ceiling, never billed by its 8 MP
    assert 1500 <= anthropic_image_tokens(3840, 2160) <= 1600
    assert anthropic_image_tokens(8000, 100) == anthropic_image_tokens(1568, 19)  # long edge 1568


def test_openai_cost_is_tiles_after_resizing():
    assert openai_image_tokens(1024, 1024) == 765  # OpenAI's example: 768 x 768, 4 tiles
    assert openai_image_tokens(2048, 4096) == 1105  # 1024 x 2048 -> 768 x 1536, 6 tiles
    assert openai_image_tokens(4096, 8192, "low") == 85
    assert openai_image_tokens(100, 100) == 255  # one tile


def test_block_sizes_from_base64_sources():
    data = base64.b64encode(jpeg(1200, 800) + b"\0" * 200_000).decode()
    anthropic = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": data}}
    openai = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}}
    assert image_block_size(anthropic) == image_block_size(openai) == (1200, 800)
    assert image_block_size({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}) is None
    assert decode_base64_head("!!!not base64") == b"" or image_size(decode_base64_head("!!!")) is None
