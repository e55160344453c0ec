"""`--verify-diagnostics` and `--split-input-file`, in the style of mlir-opt.

A test file states the diagnostics it must produce in comments:

    # expected-error@+1 {{One of src or dst must be a BufferedRef.}}
    buffered_copy x -> y

The severities are `error`, `warning`, `remark` and `note` (a note of an
error or a warning). Where the diagnostic is expected, as in MLIR: without a
designator, on the comment's own line; `@+N` / `@-N`, N lines down or up;
`@above`, the last line above that holds no expectation; `@below`, the next
such line below; `@unknown`, a diagnostic with no location. (`//` starts
them in `.mlir` and `.dma` files.) The text in braces must occur in the
message; write the whole message to check it exactly. An expectation that
is not produced fails, and so does an error, warning or remark that no
expectation names; notes need not be named. Problems print as
`file:line:col: error: ...`, so that editors can jump to them.

With `--split-input-file`, chunks split at a `# -----` (or `// -----`) line
are checked one by one, keeping their line numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from copyir import errors
from copyir.diagnostics import Diagnostic
from copyir.errors import CopyIRError, CopyIRWarning, Loc

_EXPECTED = re.compile(
    r"(?:#|//)\s*(?P<tag>expected-(?P<severity>error|warning|remark|note))"
    r"\s*(?:@(?P<where>[+-]\d+|above|below|unknown))?\s*\{\{(?P<text>.*?)\}\}"
)
_SPLIT = re.compile(r"^\s*(?:#|//) -----\s*$", re.MULTILINE)
MAX_OFFSET_DIGITS = 9


@dataclass(frozen=True)
class Expected:
    """A diagnostic a file expects: `line` None means no location
    (`@unknown`); `loc` is the comment, where a mismatch is reported."""

    severity: str
    line: int | None
    text: str
    loc: Loc | None = None


@dataclass(frozen=True)
class Chunk:
    """A part of a file, padded with blank lines so its lines keep their numbers."""

    text: str
    first_line: int


def split_chunks(text: str, split: bool) -> list[Chunk]:
    if not split:
        return [Chunk(text, 1)]
    chunks, start, line = [], 0, 1
    for match in _SPLIT.finditer(text):
        chunks.append(Chunk(text[start : match.start()], line))
        line += text.count("\n", start, match.end())
        start = match.end()
    chunks.append(Chunk(text[start:], line))
    return [Chunk("\n" * (c.first_line - 1) + c.text, c.first_line) for c in chunks]


def expectations(text: str, filename: str = "<input>") -> list[Expected]:
    """The expectations of a file, in order; a malformed one is a located
    `CopyIRError`."""
    found: list[Expected] = []
    below: list[int] = []  # indices of `@below`s waiting for their line
    last_plain = 0
    for number, line in enumerate(text.splitlines(), start=1):
        matches = list(_EXPECTED.finditer(line))
        if not matches:
            for index in below:
                found[index] = _at(found[index], number)
            below.clear()
            last_plain = number
            continue
        for match in matches:
            loc = Loc(filename, number, match.start("tag") + 1)
            severity, where = match["severity"], match["where"]
            target: int | None = number
            if where == "unknown":
                target = None
            elif where == "above":
                target = last_plain
            elif where == "below":
                below.append(len(found))
                target = 0  # dangling unless a plain line follows
            elif where is not None:
                if len(where) - 1 > MAX_OFFSET_DIGITS:
                    raise CopyIRError(
                        errors.EXPECTATION_OFFSET.format(severity=severity), loc
                    )
                target = number + int(where)
            found.append(Expected(severity, target, match["text"], loc))
    return found


def _at(expected: Expected, line: int) -> Expected:
    return Expected(expected.severity, line, expected.text, expected.loc)


def produced(
    error: CopyIRError | None, warnings: Iterable[CopyIRWarning] = ()
) -> list[Diagnostic]:
    """Every diagnostic a run produced, notes as diagnostics of their own
    (a note without a location is placed at its error's)."""
    found = []
    for item in [*warnings, *([error] if error is not None else [])]:
        main = Diagnostic.of(item)
        found.append(main)
        found += [Diagnostic("note", n.message, n.loc or main.loc) for n in item.notes]
    return found


def check(
    diagnostics: Sequence[Diagnostic], expected: Sequence[Expected], filename: str
) -> list[Diagnostic]:
    """The mismatches, as error diagnostics to print; empty when the
    diagnostics are exactly the expected ones."""
    remaining = list(diagnostics)
    problems = []
    for want in expected:
        match = next((d for d in remaining if _satisfies(d, want, filename)), None)
        if match is None:
            message = errors.EXPECTED_NOT_PRODUCED.format(
                severity=want.severity, text=want.text
            )
            problems.append(Diagnostic("error", message, want.loc))
        else:
            remaining.remove(match)
    for got in remaining:
        if got.severity != "note":
            message = errors.UNEXPECTED_DIAGNOSTIC.format(
                severity=got.severity, message=got.message
            )
            problems.append(Diagnostic("error", message, got.loc))
    return sorted(problems, key=lambda d: d.loc.line if d.loc else 0)


def _satisfies(produced: Diagnostic, want: Expected, filename: str) -> bool:
    if produced.severity != want.severity or want.text not in produced.message:
        return False
    if want.line is None:
        return produced.loc is None
    loc = produced.loc
    return loc is not None and loc.file == filename and loc.line == want.line
