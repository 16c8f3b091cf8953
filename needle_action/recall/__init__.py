"""Positional recall: needles placed in the user's own prompt shape, asked for, answered, counted.

Three jobs, one folder each: :mod:`.trials` builds a trial inside the user's request (needles,
filler, the haystack, the slots, probes, scoring); :mod:`.run` runs every trial of a run through
one scheduler (cells, looks, caches, batches, shards); :mod:`.plan` decides before any call what a
run needs (settings, grid, trials, cost). :mod:`.diagnose` reads a finished grid as a whole. The
statistics they share with the compare stage live in :mod:`needle_action.stats`.
"""
