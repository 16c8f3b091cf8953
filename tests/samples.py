"""Sample requests shared by unit and integration tests (data, and the constructors of it)."""

from __future__ import annotations

from typing import Any

from needle_action.request.prompt import Message, RenderedPrompt

# A short retrieval chat in the Anthropic Messages shape: a system text, a multi-turn history and a
# last user turn given as content blocks (the runtime guard and the fake count both shapes).
SYSTEM = "You answer questions about the retrieved documents only. Cite the document id."
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "Doc 1: The Rhine flows through six countries.\n\nQuestion: how many?"},
    {"role": "assistant", "content": "Six."},
    {"role": "user", "content": [{"type": "text", "text": "And which river is it?"}]},
]


def weather_agent(
    last_turn: tuple[dict[str, Any], ...], tools: tuple[dict[str, Any], ...], **extra: Any
) -> RenderedPrompt:
    """An agent's request after one tool call: the user's question, the assistant's ``get_weather``
    call (id ``toolu_1``), then LAST_TURN (its tool_result and whatever follows) as the last user turn."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    return RenderedPrompt(
        system=extra.pop("system", "You are terse."),
        messages=(
            Message("user", "Weather in Paris?"),
            Message("assistant", ({"type": "text", "text": "Let me look."}, call)),
            Message("user", last_turn),
        ),
        tools=tools,
        tool_choice={"type": "auto"},
        **extra,
    )


def after_tool_call(
    ask: str, call: dict[str, Any], last_turn: tuple[dict[str, Any], ...], *, system: str, **extra: Any
) -> RenderedPrompt:
    """An agent's request after one tool call: the user's ASK, the assistant's CALL (a tool_use
    block), then LAST_TURN (the tool_result and whatever follows it) as the last user turn."""
    messages = (Message("user", ask), Message("assistant", (call,)), Message("user", last_turn))
    return RenderedPrompt(system=system, messages=messages, **extra)


def history_template(
    system: str,
    *,
    turns: str = "messages",
    role: str = "role",
    text: str = "content",
    ask: str = "q",
    indent: str = "",
) -> str:
    """A chat template as teams write it: a SYSTEM line, a loop over the fixture's TURNS that writes
    each turn's ROLE as a role marker and its TEXT (led by INDENT) below it, then the user's ASK.
    With the defaults, line by line: ``system:``, SYSTEM, ``{% for turn in messages %}``,
    ``{{ turn.role }}:``, ``{{ turn.content }}``, ``{% endfor %}``, ``user:``, ``{{ q }}``."""
    loop = [f"{{% for turn in {turns} %}}", f"{{{{ turn.{role} }}}}:", f"{indent}{{{{ turn.{text} }}}}"]
    return "\n".join(["system:", system, *loop, "{% endfor %}", "user:", f"{{{{ {ask} }}}}", ""])


def tool(
    name: str, description: str, properties: dict[str, Any], required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A tool definition in the Anthropic shape: NAME, DESCRIPTION and an object input schema with
    PROPERTIES (name -> JSON schema), the REQUIRED ones listed when there are any."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return {"name": name, "description": description, "input_schema": schema}
