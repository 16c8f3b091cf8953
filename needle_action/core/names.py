"""The names a user may write where a fixed set applies, one table each, below every stage.

``needle.toml`` (config), the CLI's choices, the action's inputs and the stages that act on them
all read the set from here, so a name is added in one place. Stdlib only: the lowest layer.
"""

from __future__ import annotations

import typing
from typing import Literal

# model providers; what each needs (key variables, endpoint, class) is providers/specs.py's table.
# bedrock and vertex serve Claude, azure serves OpenAI's models, each in the team's own cloud account
ProviderName = Literal["anthropic", "openai", "local", "bedrock", "vertex", "azure"]
PROVIDER_NAMES: tuple[ProviderName, ...] = typing.get_args(ProviderName)
# the providers whose requests are the Anthropic Messages API's body, with its rules on turns (a user
# turn first and last); OpenAI's chat API (openai, azure, the local model's) takes a system-only
# request or one that ends with an assistant turn
MESSAGES_API_PROVIDERS: frozenset[ProviderName] = frozenset({"anthropic", "bedrock", "vertex"})

# request parameters each API knows (sent as written either way: an unknown one gets a warning, the
# loader's, and the wire conversion maps the known ones between the two APIs)
ANTHROPIC_PARAMS = frozenset(
    {
        "thinking",
        "output_config",
        "output_format",
        "metadata",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "service_tier",
        "container",
        "mcp_servers",
        "context_management",
        "inference_geo",
    }
)
OPENAI_PARAMS = frozenset(
    {
        "response_format",
        "reasoning_effort",
        "temperature",
        "top_p",
        "frequency_penalty",
        "presence_penalty",
        "seed",
        "stop",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "n",
        "parallel_tool_calls",
        "metadata",
        "service_tier",
        "store",
        "user",
        "modalities",
        "prediction",
        "audio",
        "web_search_options",
        "verbosity",
        "prompt_cache_key",
        "safety_identifier",
    }
)


def known_param(name: str) -> bool:
    """Whether NAME is a request parameter of the Anthropic or the OpenAI API."""
    return name in ANTHROPIC_PARAMS or name in OPENAI_PARAMS


__all__ = ["ANTHROPIC_PARAMS", "OPENAI_PARAMS", "PROVIDER_NAMES", "ProviderName", "known_param"]

# needle styles (docs/needles.md); the two that change how a trial is built or counted are named
NeedleStyle = Literal[
    "codeword", "sentence", "distractors", "multihop", "custom", "gold", "nonlexical", "absent"
]
NEEDLE_STYLES: tuple[NeedleStyle, ...] = typing.get_args(NeedleStyle)
GOLD_STYLE: NeedleStyle = "gold"  # the fixture's own gold item moved among its other items
ABSENT_STYLE: NeedleStyle = "absent"  # its cells count abstentions: the answer is not in the context
