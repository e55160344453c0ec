"""A problem the validator finds, and the first of several."""

from __future__ import annotations

import numpy as np

from copyir.errors import Loc


class StreamProblem(Exception):
    """A problem found at one instruction; the caller locates it."""

    def __init__(self, row: int, message: str, malformed: bool, loc: Loc | None = None):
        super().__init__(message)
        self.row = row
        self.message = message
        self.malformed = malformed
        self.loc = loc


def first_problem(problems) -> tuple[int, str] | None:
    """The earliest row with a problem, and its message (the first check
    listed wins at one row)."""
    best = None
    for mask, message in problems:
        rows = np.flatnonzero(mask)
        if rows.size and (best is None or rows[0] < best[0]):
            best = (int(rows[0]), message)
    return None if best is None else (best[0], best[1](best[0]))
