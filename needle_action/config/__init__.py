"""The threshold file (``needle.toml``): its typed model and the loader that fills it.

``from needle_action.config import load_config, Config`` is the way in; the submodules are
``model`` (pydantic), ``loader`` (file -> ``Config`` or a ``ConfigError`` with file:line),
``toml_lines`` and ``pydantic_errors`` (the loader's line mapping and error wording).
``needle init`` lives above assemble, in :mod:`needle_action.scaffold` (it renders templates).
"""

from needle_action.config.loader import FIXTURE_SUFFIXES, load_config
from needle_action.config.model import (
    DEFAULT_DEPTHS,
    LOOK_ALIKE_STYLES,
    PROVIDERS,
    Config,
    FileAccess,
    Growth,
    NeedleSpec,
    PromptConfig,
    PromptSettings,
    ProviderSettings,
    RecallSettings,
    parse_growth,
)
from needle_action.core.names import NEEDLE_STYLES

__all__ = [
    "DEFAULT_DEPTHS",
    "FIXTURE_SUFFIXES",
    "LOOK_ALIKE_STYLES",
    "NEEDLE_STYLES",
    "PROVIDERS",
    "Config",
    "FileAccess",
    "Growth",
    "NeedleSpec",
    "PromptConfig",
    "PromptSettings",
    "ProviderSettings",
    "RecallSettings",
    "load_config",
    "parse_growth",
]
