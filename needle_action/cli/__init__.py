"""Face 1, the ``needle`` command line: one module per command, each parsing its options, calling
the pipeline, printing and exiting by policy (:mod:`.common` holds the options and outputs they
share; :mod:`.app` the group that gathers them)."""

from needle_action.cli.app import main

__all__ = ["main"]
