"""Reading inputs and writing outputs safely.

Inputs are read whole and never modified; outputs go to a temporary file in
the destination's directory and are renamed over it, so a reader never sees
half a file.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from copyir import errors
from copyir.errors import CopyIRError, Loc


class FileError(Exception):
    """A file that cannot be read or written at all: a usage error (exit 2)."""


def read_source(path: str) -> tuple[str, str]:
    """The text of a source file and the name diagnostics use for it.

    `-` is standard input. Bytes that are not UTF-8 are a located
    `CopyIRError`; a missing file or a directory is `FileError`.
    """
    if path == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        target = Path(path)
        if target.is_dir():
            raise FileError(f"{path} is a directory")
        try:
            data = target.read_bytes()
        except OSError as err:
            raise FileError(f"cannot read {path}: {err.strerror or err}") from None
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
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as err:
        raise FileError(f"cannot write {path}: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
        os.replace(tmp, target)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise FileError(f"cannot write {path}: {err.strerror or err}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_inputs(specs: list[str]) -> dict[str, np.ndarray]:
    """Arrays from `--input name=file.npy` and `--input file.npz` (each key).

    A missing, unreadable or corrupt file is an `FileError`, one line.
    """
    inputs: dict[str, np.ndarray] = {}

    def add(name: str, array: np.ndarray, source: str) -> None:
        if name in inputs:
            raise FileError(f"input {name} is given twice (again in {source})")
        inputs[name] = array

    for spec in specs:
        name, sep, path = spec.partition("=")
        if sep:
            if not name:
                raise FileError(f"--input {spec}: the name before = is empty")
            array = _load(path)
            if not isinstance(array, np.ndarray):
                raise FileError(f"{path} is not a .npy array (give an .npz alone)")
            add(name, array, path)
            continue
        data = _load(spec)
        if isinstance(data, np.ndarray):
            raise FileError(f"{spec} is a single array: give it a name, NAME={spec}")
        for key in data:
            add(key, data[key], spec)
    return inputs


def _load(path: str):
    """np.load without pickles, with every failure as one line."""
    if Path(path).is_dir():
        raise FileError(f"{path} is a directory")
    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                return {key: data[key] for key in data.files}
        return data
    except FileNotFoundError:
        raise FileError(f"cannot read {path}: No such file or directory") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise FileError(f"cannot read {path}: {err}") from None


def save_outputs(path: str, arrays: dict[str, np.ndarray]) -> None:
    """All arrays in one `.npz`, written atomically.

    The members are written one by one rather than through `np.savez(**)`,
    whose own keyword arguments (`file`, `allow_pickle`) would swallow
    parameters of those names.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(
                    member, np.ascontiguousarray(array), allow_pickle=False
                )
    write_atomic(path, buffer.getvalue())
