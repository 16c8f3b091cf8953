"""The sticky comment's body as both faces write it: the hidden line naming the head commit.

The action posts the body (action/comment.py reads the line back to refuse overwriting a newer
head); ``needle check --base-ref --comment-out`` writes the same body to a file.
"""

from __future__ import annotations

import re

_SHA = re.compile(r"^[0-9a-f]{7,64}$")
_HEAD_LINE = re.compile(r"<!-- needle-action:head ([0-9a-f]{7,64}) -->")


def with_head(body: str, head_sha: str | None) -> str:
    """BODY with the hidden head line after its first line (the marker); unchanged for a bad sha or
    when BODY has a head line already."""
    if not head_sha or not _SHA.match(head_sha) or _HEAD_LINE.search(body[:500]):
        return body
    first, _, rest = body.partition("\n")
    return f"{first}\n<!-- needle-action:head {head_sha} -->\n{rest}"


def head_in(body: str) -> str | None:
    """The head commit BODY's hidden line names (None when it has none)."""
    m = _HEAD_LINE.search(body[:500])
    return m.group(1) if m else None


__all__ = ["head_in", "with_head"]
