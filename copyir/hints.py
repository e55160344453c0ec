"""Notes that help fix an error: did-you-means, and hints for habits that
users bring from Pallas, Python and MLIR.

A hint is a note beside an error, never a change of its message, so that
the documented messages stay exact and tests can compare them whole.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from copyir import errors
from copyir.errors import Note

_COMMENT = re.compile(r"//")
_HABITS = (
    (re.compile(r"\.[ \t]*at[ \t]*\["), errors.HINT_AT),
    (re.compile(r"\bpl[ \t]*\.[ \t]*ds[ \t]*\("), errors.HINT_DS),
)


def did_you_mean(word: str, candidates: Iterable[str]) -> tuple[Note, ...]:
    """A note naming the candidate closest to `word`, if one is close."""
    close = difflib.get_close_matches(word, candidates, n=1)
    return (Note(errors.DID_YOU_MEAN.format(name=close[0])),) if close else ()


def habit(text: str, offset: int, statement_ends: bool = True) -> tuple[Note, ...]:
    """A hint when the error at `offset` is in a construct of another
    language: Pallas' `x.at[...]` or `pl.ds(...)`, or a `//` comment where
    the statement could end (elsewhere `//` is floor division)."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    line = text[start : end if end != -1 else len(text)]
    column = offset - start
    for pattern, hint in _HABITS:
        if any(m.start() <= column < m.end() for m in pattern.finditer(line)):
            return (Note(hint),)
    # Everything after `//` is the comment, so the error may be further on.
    if statement_ends and any(m.start() <= column for m in _COMMENT.finditer(line)):
        return (Note(errors.HINT_COMMENT),)
    return ()
