"""Where a jaxpr equation came from: the user's Python line.

JAX records a traceback with every equation; its innermost frame outside
JAX (and outside copyir, which traces the user's function) is the kernel
statement. An equation JAX made itself (inside `jnp.remainder`, say) has
none of its own and takes the location of the equation around it.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr

_OURS = str(Path(__file__).resolve().parent.parent)


def location(eqn, outer: FileLineColLoc) -> FileLineColLoc:
    """The equation's `file:line:col` (1-based), or `outer`'s."""
    from jax._src import source_info_util

    traceback = getattr(eqn.source_info, "traceback", None)
    for frame in source_info_util.user_frames(traceback):
        if frame.file_name.startswith(_OURS):
            continue
        return file_line_col(frame.file_name, frame.start_line, frame.start_column + 1)
    return outer


def file_line_col(file: str, line: int, col: int) -> FileLineColLoc:
    return FileLineColLoc(StringAttr(shown(file)), IntAttr(line), IntAttr(max(col, 1)))


@functools.cache
def shown(file: str) -> str:
    """A file as messages show it: relative to the working directory when
    it lies below it, as the user would type it."""
    try:
        relative = os.path.relpath(file)
    except ValueError:
        return file
    return file if relative.startswith("..") else relative


def function_location(debug_info) -> FileLineColLoc:
    """The kernel function's own line, from JAX's `kernel at file:line`."""
    text = getattr(debug_info, "func_src_info", None) or ""
    _, _, where = text.rpartition(" at ")
    file, _, line = where.rpartition(":")
    if file and line.isdigit():
        return file_line_col(file, int(line), 1)
    return file_line_col("<kernel>", 1, 1)
