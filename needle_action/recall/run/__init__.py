"""A recall run: every trial of every prompt, both sides of a pull request, through one scheduler.

:func:`.engine.run_recall_jobs` is the way in. The scheduler (:mod:`.scheduler`) starts trials by
the looks of the sequential design (:mod:`.gate`), counts them per cell (:mod:`.cells`), builds
prompts ahead (:mod:`.build_queue`, :mod:`.prebuild`), keeps providers busy within their caps
(:mod:`.caps`, :mod:`.health`) and prompt caches warm (:mod:`.prefix`, :mod:`.ladders`). Batches
(:mod:`.batch`), shards (:mod:`.shard`, :mod:`.merge`) and the reorder arm (:mod:`.reorder`) are
other ways through the same run."""
