"""Templates, fixtures and builders -> the exact request the application would send.

:func:`needle_action.assemble.render.render_case` is the way in: one prompt x fixture as a
:class:`~needle_action.request.prompt.RenderedPrompt`. Its parts: :mod:`.templates` (the template
formats, their sandbox and worker, fixtures), :mod:`.builder` (prompts built in code),
:mod:`.recorded` (request bodies kept as data), :mod:`.request` (declarations attached, the
request checked), :mod:`.context` (where the context slot landed), :mod:`.slots` (the recall
slots checked against the template's variables before a run).
"""
