"""`--verify-diagnostics` and `--split-input-file`, in the style of mlir-opt.

A test file states the diagnostics it must produce in comments:

    # expected-error@+1 {{One of src or dst must be a BufferedRef.}}
    buffered_copy x -> y

`@+N` / `@-N` point N lines down or up; without it, the comment's own line.
`expected-note` checks a note of the error. (`//` starts them in `.mlir`
files.) As in MLIR the text in braces must occur in the message; write the
whole message to check it exactly. With `--split-input-file`, chunks split
at a `# -----` (or `// -----`) line are checked one by one, keeping their
line numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from copyir.errors import CopyIRError

_EXPECTED = re.compile(
    r"(?:#|//)\s*expected-(error|note)\s*(?:@([+-]\d+))?\s*\{\{(.*?)\}\}"
)
_SPLIT = re.compile(r"^\s*(?:#|//) -----\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Expected:
    severity: str
    line: int
    text: str


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


def expectations(text: str) -> list[Expected]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _EXPECTED.finditer(line):
            severity, offset, message = match.groups()
            found.append(Expected(severity, number + int(offset or 0), message))
    return found


def check(error: CopyIRError | None, expected: list[Expected]) -> list[str]:
    """Problems, as lines to print; empty when the diagnostics match."""
    produced = []
    if error is not None:
        line = error.loc.line if error.loc else 0
        produced.append(Expected("error", line, error.message))
        produced += [
            Expected("note", n.loc.line if n.loc else line, n.message)
            for n in error.notes
        ]
    problems = []
    for want in expected:
        match = next(
            (p for p in produced if _satisfies(p, want)),
            None,
        )
        if match is None:
            problems.append(
                f"line {want.line}: expected {want.severity} {{{{{want.text}}}}} "
                "was not produced"
            )
        else:
            produced.remove(match)
    for got in produced:
        if got.severity == "error":
            problems.append(f"line {got.line}: unexpected error: {got.text}")
    return problems


def _satisfies(produced: Expected, want: Expected) -> bool:
    return (
        produced.severity == want.severity
        and produced.line == want.line
        and want.text in produced.text
    )
