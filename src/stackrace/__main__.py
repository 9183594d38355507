"""`python -m stackrace …`: the same as the `stackrace` command."""

from __future__ import annotations

import sys

from stackrace.cli import main

if __name__ == "__main__":
    sys.exit(main())  # (argv from sys.argv: run as the program, cli.main)
