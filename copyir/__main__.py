"""`python -m copyir`: the same as the `copyir` command."""

import sys

from copyir.cli import command

sys.exit(command())
