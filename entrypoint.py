#!/usr/bin/env python3
"""Container entrypoint of the needle GitHub Action: hands over to the package, nothing else.

``--version`` prints the version and exits before the action module is imported: a cheap probe
that the pulled image starts (docs/container.md measures it), and that runs nothing of the action.
GitHub never passes arguments (action.yml has no ``args``), so the action itself never sees it.
"""

import sys

if __name__ == "__main__":
    if sys.argv[1:] == ["--version"]:
        from needle_action import __version__

        print(f"needle-action {__version__}")
        sys.exit(0)

    from needle_action.action.main import main

    sys.exit(main())
