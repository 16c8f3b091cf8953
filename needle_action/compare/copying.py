"""Fields a comparison shows as the results hold them, copied by name.

The compare models (:mod:`needle_action.compare.models`) are the comment's own schema, so they do
not embed the results models; where one of their fields is a results field unchanged, it is named
once here instead of restated as ``field=source.field`` line after line.
"""

from __future__ import annotations

from typing import Any


def same_named(source: object, names: str) -> dict[str, Any]:
    """SOURCE's attributes NAMES (separated by spaces), as keywords for a compare model."""
    return {name: getattr(source, name) for name in names.split()}
