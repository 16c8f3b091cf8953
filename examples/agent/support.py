"""The support agent's request, built the way the application builds it before
``client.messages.create(**build_support(...))``: the system policy, three tool schemas, the
customer's question, the agent's search call, and the retrieved chunks returned as that call's
tool result. needle measures this function's output (``builder = "agent/support.py:build_support"``
in needle.toml), so the prompt it checks is the one the app sends.
"""

from agent.tools import TOOLS

SYSTEM = (
    "You are the support agent of Stowly, an object storage service. Answer {customer}'s question "
    "from the search results only. If the results do not answer it, say so and offer to escalate."
)


def build_support(question: str, chunks: list[str], customer: str = "the customer") -> dict:
    """An Anthropic Messages request body for one support turn."""
    search = {"type": "tool_use", "id": "toolu_search_1", "name": "search_docs", "input": {"query": question}}
    results = {
        "type": "tool_result",
        "tool_use_id": search["id"],
        "content": [{"type": "text", "text": chunk} for chunk in chunks],
    }
    return {
        "system": SYSTEM.format(customer=customer),
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": [search]},
            {"role": "user", "content": [results, {"type": "text", "text": f"Question: {question}"}]},
        ],
    }
