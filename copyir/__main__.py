"""`python -m copyir`: the same as the `copyir` command."""

import sys

from copyir.cli import main

sys.exit(main())
