"""Diagnostics as compilers print them: `file:line:col: error: message`.

Then the source line and a caret under the column, and the same for each
related site (`note:`), so that a race shows both of its ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from copyir.errors import CopyIRError, Loc


def format_error(err: CopyIRError, sources: Mapping[str, str] | None = None) -> str:
    """The error, its location and source line, then its notes."""
    lines = _site("error", err.message, err.loc, sources or {})
    for note in err.notes:
        lines += _site("note", note.message, note.loc, sources or {})
    return "\n".join(lines)


def _site(
    severity: str, message: str, loc: Loc | None, sources: Mapping[str, str]
) -> list[str]:
    if loc is None:
        prefix = "copyir: " if severity == "error" else ""
        return [f"{prefix}{severity}: {message}"]
    lines = [f"{loc}: {severity}: {message}"]
    source = _source_line(loc, sources)
    if source is not None:
        prefix = "".join(c if c == "\t" else " " for c in source[: loc.col - 1])
        lines += [source, prefix + "^"]
    return lines


MAX_SOURCE = 1 << 24
"""Larger files are not read for a diagnostic's source line."""


def _source_line(loc: Loc, sources: Mapping[str, str]) -> str | None:
    """Line `loc.line` of the file, from the texts at hand or from disk.

    A location can name any path (a `loc(...)` is user text), so only a
    regular file of reasonable size is read: never a device or a pipe.
    """
    text = sources.get(loc.file)
    if text is None:
        path = Path(loc.file)
        try:
            if not path.is_file() or path.stat().st_size > MAX_SOURCE:
                return None
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            return None
    lines = text.splitlines()
    if not 1 <= loc.line <= len(lines):
        return None
    return lines[loc.line - 1].rstrip()
