"""Reading inputs and writing outputs safely.

Inputs are read whole and never modified; outputs go to a temporary file in
the destination's directory and are renamed over it, so a reader never sees
half a file.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from copyir import errors
from copyir.errors import CopyIRError, Loc


class UnreadableInput(Exception):
    """A file that cannot be read at all: a usage error (exit 2)."""


def read_source(path: str) -> tuple[str, str]:
    """The text of a source file and the name diagnostics use for it.

    `-` is standard input. Bytes that are not UTF-8 are a located
    `CopyIRError`; a missing file or a directory is `UnreadableInput`.
    """
    if path == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        target = Path(path)
        if target.is_dir():
            raise UnreadableInput(f"{path} is a directory")
        try:
            data = target.read_bytes()
        except OSError as err:
            raise UnreadableInput(
                f"cannot read {path}: {err.strerror or err}"
            ) from None
        name = path
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        why = f"byte 0x{data[err.start]:02x} at offset {err.start}"
        raise CopyIRError(
            errors.NOT_UTF8.format(why=why), Loc(name, line, col)
        ) from None


def write_atomic(path: str, data: str | bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename."""
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
