"""A pull request's two sides measured the one way, for both faces (the action, and ``needle check
--base-ref`` / ``needle diff``): the run's typed settings (:mod:`.settings`), the base commit and
its worktree (:mod:`.baseline`) or the data branch (:mod:`.databranch`), the trusted config
(:mod:`.trust`), the builders' environment (:mod:`.builder_env`), both sides in one scheduler
(:mod:`.sides`); what it says goes through the face's :mod:`.notices`."""
