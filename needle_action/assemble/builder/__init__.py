"""Prompts built in code: a pull request's ``builder = "file.py:function"`` called in a worker
process that runs nothing of needle's (:mod:`.worker`), as an unprivileged user in a copy of the
repository (:mod:`.sandbox`), from the parent's side (:mod:`.client`: batches, a cache, errors)."""
