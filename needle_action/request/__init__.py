"""The request as plain data: system, messages and their content blocks, tools, tool choice and
parameters (:mod:`.prompt`, :mod:`.blocks`); tool schemas in both vendors' formats
(:mod:`.toolformats`); JSON Pointers into a body (:mod:`.jsonpointer`); orderings of retrieved
context (:mod:`.ordering`). Below every stage that builds, counts, sends or shows a request."""
