#!/usr/bin/env python3
"""Container entrypoint of the needle GitHub Action: hands over to the package, nothing else."""

import sys

from needle_action.action.main import main

if __name__ == "__main__":
    sys.exit(main())
