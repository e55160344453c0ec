"""xDSL locations as copyir uses them: a source position and a note.

Every op carries the `file:line:col` of the statement it came from; a
lowering may wrap it in a named location whose name notes where inside the
statement the op came from (a pytree leaf, a block and slot).
"""

from __future__ import annotations

from typing import cast

from xdsl.dialects.builtin import (
    ArrayAttr,
    FileLineColLoc,
    FusedLoc,
    NameLoc,
    StringAttr,
)
from xdsl.ir import Attribute

from copyir.errors import Loc


def loc_of(location: Attribute) -> Loc | None:
    """The file, line and column of an xDSL location, if it has usable ones.

    Only a `file:line:col` location with a file name and a line and column
    from 1 up can point a user at a line; parsers replace any other. A
    named location (a lowering's note, such as the pytree leaf a DMA came
    from) is looked through to the position it names.
    """
    if isinstance(location, NameLoc):
        return loc_of(location.location)
    if isinstance(location, FusedLoc):
        locations = cast(ArrayAttr, location.locations)  # its constraint
        return next(filter(None, map(loc_of, locations)), None)
    if isinstance(location, FileLineColLoc):
        file, line, col = (
            location.filename.data,
            location.line.data,
            location.column.data,
        )
        if file and line >= 1 and col >= 1:
            return Loc(file, line, col)
    return None


def detail_of(location: Attribute) -> str:
    """The note a lowering attached to a location (`leaf ['w'][1]`), or ''."""
    if isinstance(location, NameLoc):
        return location.desc.data
    return ""


def with_detail(location: Attribute, detail: str) -> NameLoc:
    """The location with a note on where inside the statement an op came from."""
    return NameLoc(StringAttr(detail), location)
