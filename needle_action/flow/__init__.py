"""What both faces share: a pull request's two sides measured the one way, for the action and for
``needle check --base-ref``.

``sides`` (base commit, trusted settings, base worktree or data branch, both sides in one
scheduler), ``settings`` (the run's settings, typed once: INPUT_*/GITHUB_* or the CLI's), ``trust``
(the base's threshold file applied to the head's), ``baseline`` (git: commits, worktrees),
``databranch`` (results stored per main-branch commit), ``workflow`` (workflow commands and files:
annotations, masks, outputs, summary), ``comment_body`` (the hidden head line of the comment).

Below the faces (``cli``, ``action``), which import from here and never from each other; above
``pipeline`` and ``policy``.
"""
