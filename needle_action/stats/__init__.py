"""The statistics recall runs by and the compare stage judges by, one concept a module: a cell's
verdict and early stopping (:mod:`.cells`), intervals (:mod:`.intervals`), exact tests
(:mod:`.exact`), groups of cells (:mod:`.groups`), power and trial planning (:mod:`.power`), the
group-sequential looks (:mod:`.sequential`), earlier runs pooled into a base (:mod:`.pooling`),
runs with levels of their own: the spread and the cross-run tests (:mod:`.runs`), and which stored
runs a comparison across runs rests on, from results files (:mod:`.levels`).
Pure functions over counts; stdlib only."""
