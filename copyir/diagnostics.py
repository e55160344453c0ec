"""Diagnostics as compilers print them: `file:line:col: error: message`.

Then the source line and a caret under the column, and the same for each
related site (`note:`), so that a race shows both of its ends. Warnings
(`CopyIRWarning`) print the same way with `warning:`.

Source lines come only from the texts the caller read (the files named on
the command line): a `loc("file":line:col)` is user text and may name any
path, so a diagnostic never opens a file by itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from copyir.errors import CopyIRError, CopyIRWarning, Loc, Note


@dataclass(frozen=True)
class Diagnostic:
    """One diagnostic to print or to match: severity is error, warning,
    remark or note."""

    severity: str
    message: str
    loc: Loc | None = None
    notes: tuple[Note, ...] = ()

    @classmethod
    def of(cls, item: CopyIRError | CopyIRWarning) -> Diagnostic:
        severity = "warning" if isinstance(item, CopyIRWarning) else "error"
        return cls(severity, item.message, item.loc, item.notes)


def format_diagnostic(
    diagnostic: Diagnostic, sources: Mapping[str, str] | None = None
) -> str:
    """The diagnostic, its location and source line, then its notes."""
    sources = sources or {}
    lines = _site(diagnostic.severity, diagnostic.message, diagnostic.loc, sources)
    for note in diagnostic.notes:
        lines += _site("note", note.message, note.loc, sources)
    return "\n".join(lines)


def format_error(err: CopyIRError, sources: Mapping[str, str] | None = None) -> str:
    """An error as `format_diagnostic` prints it."""
    return format_diagnostic(Diagnostic.of(err), sources)


def _site(
    severity: str, message: str, loc: Loc | None, sources: Mapping[str, str]
) -> list[str]:
    if loc is None:
        prefix = "" if severity == "note" else "copyir: "
        return [f"{prefix}{severity}: {message}"]
    lines = [f"{loc}: {severity}: {message}"]
    source = _source_line(loc, sources)
    if source is not None:
        prefix = "".join(c if c == "\t" else " " for c in source[: loc.col - 1])
        lines += [source, prefix + "^"]
    return lines


def _source_line(loc: Loc, sources: Mapping[str, str]) -> str | None:
    """Line `loc.line` of the file, if it is one of the texts at hand."""
    text = sources.get(loc.file)
    if text is None:
        text = next(
            (t for name, t in sources.items() if _same_path(name, loc.file)), None
        )
    if text is None:
        return None
    lines = text.splitlines()
    if not 1 <= loc.line <= len(lines):
        return None
    return lines[loc.line - 1].rstrip()


def _same_path(a: str, b: str) -> bool:
    """Two spellings of one path (`./x.cpy` and `x.cpy`); never touches disk
    beyond resolving the names."""
    if a.startswith("<") or b.startswith("<"):
        return False
    return os.path.realpath(a) == os.path.realpath(b)
