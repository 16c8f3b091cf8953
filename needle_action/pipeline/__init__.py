"""One measurement end to end, written once for both faces: budgets, recall or both, for one
config or for a pull request's two sides in one scheduler (:mod:`.measure`); builders' requests
captured in one job and measured in another (:mod:`.capture`); the exit policy (:mod:`.policy`)."""
