"""The names a user may write where a fixed set applies, one table each, below every stage.

``needle.toml`` (config), the CLI's choices, the action's inputs and the stages that act on them
all read the set from here, so a name is added in one place. Stdlib only: the lowest layer.
"""

from __future__ import annotations

import typing
from typing import Literal

# model providers; what each needs (key variables, endpoint, class) is providers/specs.py's table
ProviderName = Literal["anthropic", "openai", "local"]
PROVIDER_NAMES: tuple[ProviderName, ...] = typing.get_args(ProviderName)

__all__ = ["PROVIDER_NAMES", "ProviderName"]
