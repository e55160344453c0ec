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
import tomllib
from dataclasses import dataclass
from pathlib import Path

from copyir.errors import CopyIRError
from copyir.machine import SPACES

_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_SIZE = re.compile(r"\s*(\d+)\s*(B|KiB|MiB|GiB)?\s*")


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
    """A built-in target by name, or a user's target from a TOML file."""
    if name_or_path in BUILTIN:
        return BUILTIN[name_or_path]
    path = Path(name_or_path)
    if path.suffix != ".toml":
        known = ", ".join(BUILTIN)
        raise CopyIRError(
            f"Unknown target {name_or_path} (built-in: {known}; or a .toml file)"
        )
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise CopyIRError(f"Cannot read target {name_or_path}: {err}") from None
    return _target_from_table(table, default_name=path.stem)


def _target_from_table(table: dict, default_name: str) -> Target:
    name = str(table.get("name", default_name))
    if name in BUILTIN:  # a stream names its target; keep the names unique
        raise CopyIRError(f"Target name {name} is taken by a built-in target")
    spaces = {}
    for space in SPACES:
        entry = table.get(space)
        if not isinstance(entry, dict):
            raise CopyIRError(f"Target {name} has no [{space}] table")
        capacity = _size(entry.get("capacity"), f"{space}.capacity")
        alignment = _size(entry.get("alignment", 1), f"{space}.alignment")
        if alignment < 1 or alignment & (alignment - 1):
            raise CopyIRError(
                f"Target {name}: {space}.alignment must be a power of two, "
                f"got {alignment}"
            )
        spaces[space] = Space(capacity, alignment)
    return Target(str(name), spaces)


def _size(value: object, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and (match := _SIZE.fullmatch(value)):
        return int(match.group(1)) * _UNITS[match.group(2) or ""]
    raise CopyIRError(
        f"Target field {what} must be a byte count such as 4096 or '64 MiB', "
        f"got {value!r}"
    )
