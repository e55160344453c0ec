"""Targets: the capacity and alignment of each memory space.

The default target, `default`, has 16 GiB of HBM, 128 MiB of VMEM (as on
recent TPUs) and 1 MiB of SMEM. `small` is a deliberately tight target for
tests and for seeing capacity errors. A user's own target is a TOML file:

    name = "my-chip"
    [hbm]
    capacity = 17179869184
    alignment = 512
    [vmem]
    capacity = "64 MiB"      # integers are bytes; strings may use KiB/MiB/GiB
    alignment = 512
    [smem]
    capacity = "16 KiB"
    alignment = 4
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from copyir import errors, limits
from copyir.errors import InvocationError
from copyir.machine import SPACES

_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_SIZE = re.compile(r"\s*(\d{1,30})\s*(B|KiB|MiB|GiB)?\s*")

MAX_BYTES = limits.MAX_OFFSET
"""The largest capacity or alignment: a stream keeps byte addresses, ends
and counts in signed 64-bit fields, where a buffer's address plus an
access's index arithmetic must stay below `limits.LIMIT`."""


@dataclass(frozen=True)
class Space:
    capacity: int
    alignment: int


@dataclass(frozen=True)
class Target:
    name: str
    spaces: dict[str, Space]

    def capacity(self, space: str) -> int:
        return self.spaces[space].capacity

    def alignment(self, space: str) -> int:
        return self.spaces[space].alignment


DEFAULT = Target(
    "default",
    {
        "hbm": Space(16 << 30, 512),
        "vmem": Space(128 << 20, 512),
        "smem": Space(1 << 20, 4),
    },
)
SMALL = Target(
    "small",
    {
        "hbm": Space(1 << 30, 512),
        "vmem": Space(1 << 20, 512),
        "smem": Space(16 << 10, 4),
    },
)
BUILTIN = {t.name: t for t in (DEFAULT, SMALL)}


def get_target(name_or_path: str) -> Target:
    """A built-in target by name, or a user's target from a TOML file.

    A target that cannot be had is an `InvocationError`: the command line
    (or the file it names) is wrong, not the program.
    """
    if name_or_path in BUILTIN:
        return BUILTIN[name_or_path]
    import tomllib  # only for a user's target

    path = Path(name_or_path)
    if path.suffix != ".toml":
        known = ", ".join(BUILTIN)
        raise InvocationError(
            errors.UNKNOWN_TARGET.format(name=name_or_path, known=known)
        )
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise InvocationError(
            errors.CANNOT_READ_TARGET.format(name=name_or_path, why=why)
        ) from None
    except ValueError:  # an integer past Python's conversion limit
        raise InvocationError(
            errors.CANNOT_READ_TARGET.format(
                name=name_or_path, why=errors.TOO_MANY_DIGITS
            )
        ) from None
    return _target_from_table(table, default_name=path.stem)


def _target_from_table(table: dict, default_name: str) -> Target:
    name = str(table.get("name", default_name))
    if name in BUILTIN:  # a stream names its target; keep the names unique
        raise InvocationError(errors.TARGET_NAME_TAKEN.format(name=name))
    spaces = {}
    for space in SPACES:
        entry = table.get(space)
        if not isinstance(entry, dict):
            raise InvocationError(errors.TARGET_NO_TABLE.format(name=name, space=space))
        capacity = _size(entry.get("capacity"), f"{space}.capacity")
        alignment = _size(entry.get("alignment", 1), f"{space}.alignment")
        if alignment < 1 or alignment & (alignment - 1):
            raise InvocationError(
                errors.TARGET_ALIGNMENT.format(name=name, space=space, value=alignment)
            )
        spaces[space] = Space(capacity, alignment)
    return Target(str(name), spaces)


def _size(value: object, what: str) -> int:
    """A byte count from TOML: an integer, or a string such as '64 MiB'."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        size = value
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value)):
        size = int(match.group(1)) * _UNITS[match.group(2) or ""]
    else:
        raise InvocationError(
            errors.TARGET_FIELD.format(what=what, value=_shown(repr(value)))
        )
    if size > MAX_BYTES:
        raise InvocationError(
            errors.TARGET_TOO_LARGE.format(
                what=what, limit=MAX_BYTES, value=_shown(str(size))
            )
        )
    return size


def _shown(text: str, limit: int = 40) -> str:
    """A value as a message shows it: a crafted one can be thousands of
    characters long."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
