"""The agent's tools, as the application registers them."""

TOOLS = [
    {
        "name": "search_docs",
        "description": "Search the product documentation; returns the most relevant chunks.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to search for."}},
            "required": ["query"],
        },
    },
    {
        "name": "lookup_order",
        "description": "Look up a customer's order or subscription by its id.",
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"}},
            "required": ["order_id"],
        },
    },
    {
        "name": "escalate_to_human",
        "description": "Hand the conversation to a human agent with a short summary.",
        "input_schema": {
            "type": "object",
            "properties": {
                "summary": {"type": "string"},
                "priority": {"type": "string", "enum": ["low", "normal", "urgent"]},
            },
            "required": ["summary"],
        },
    },
]
