"""The base every stage stands on: errors and exit codes, the names a user may write, paths from
untrusted input (the workspace a run may read), untrusted data formats, and the pipe protocol of
needle's worker processes. Standard library (and a parser) only; imports nothing above it."""
