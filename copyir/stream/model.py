"""A DMA program as tables: the `Stream`, its buffers, loops and origins.

The tables' instruction rows are laid out by `copyir.dma_schema`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.ir.affine import AffineMap, AffineSet

from copyir import errors
from copyir.dma_schema import Compute
from copyir.dtypes import BY_NAME
from copyir.errors import InternalError, Loc


@dataclass(frozen=True)
class Buffer:
    """A buffer of the program: a parameter (bound by name) or scratch."""

    name: str
    space: str
    address: int
    dtype: str
    shape: tuple[int, ...]
    param: bool
    loc: Loc | None = field(default=None, compare=False)
    """Where the program declares it (for warnings about a parameter)."""

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * BY_NAME[self.dtype].itemsize


@dataclass(frozen=True)
class SemaphoreName:
    """The name a user gave a semaphore, or an array of them from `first` on."""

    name: str
    first: int
    shape: tuple[int, ...]

    @property
    def count(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Origin:
    """Where an instruction came from: a source position and a note."""

    loc: Loc | None
    detail: str = ""

    def __str__(self) -> str:
        where = str(self.loc) if self.loc is not None else "?"
        return f"{where} {self.detail}".rstrip()


@dataclass(frozen=True)
class CountedLoop:
    """A counted loop: instructions whose `loop` column names it (or a loop
    inside it) run once per index 0 .. trip_count - 1."""

    name: str
    trip_count: int
    parallel: bool = False
    parent: int = 0
    """The enclosing loop, 1-based; 0 at the top level."""


@dataclass
class Stream:
    """A DMA program as tables: the interpreter's input and the binary form."""

    kernel: str
    target: str
    semaphores: int
    buffers: list[Buffer]
    instructions: np.ndarray
    origins: list[Origin] = field(default_factory=list)
    semaphore_names: list[SemaphoreName] = field(default_factory=list)
    loops: list[CountedLoop] = field(default_factory=list)
    maps: list[AffineMap] = field(default_factory=list)
    """Affine maps of the enclosing loops' indices (d0 the outermost)."""
    predicates: list[tuple[AffineSet, ...]] = field(default_factory=list)
    """Each an `or` of affine sets over the enclosing loops' indices."""
    computes: list[Compute] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    """What each opaque computation computes (`dma.opaque "exp"`)."""
    source: str | None = None
    """The file the stream was read from, if any."""
    lines: list[Loc | None] | None = None
    """Where each instruction is written in that file (`.dma` text only), so
    that a malformed field is reported at its line."""
    lowered: bool = False
    """Made by copyir's own lowering of a verified program, not read or
    built by hand: a malformed field in it is copyir's bug, an
    `InternalError`, never `Malformed DMA stream`."""

    def written_at(self, row: int) -> Loc | None:
        if self.lines is not None and 0 <= row < len(self.lines):
            return self.lines[row]
        return None

    def sem_name(self, sem: int) -> str:
        """A semaphore as the program named it (`s`, `sems[1, 0]`), else its id."""
        for named in self.semaphore_names:
            if named.first <= sem < named.first + named.count:
                if not named.shape:
                    return named.name
                index = np.unravel_index(sem - named.first, named.shape)
                return f"{named.name}[{', '.join(str(int(i)) for i in index)}]"
        return str(sem)

    @property
    def rank(self) -> int:
        return self.instructions.dtype["shape"].shape[0]

    def origin(self, index: int) -> Origin:
        """The origin of instruction `index`."""
        position = int(self.instructions["origin"][index])
        return self.origins[position] if position >= 0 else Origin(None)

    def validate(self, name: str | None = None) -> None:
        """Check every field and every access (see `copyir.validate`); raise
        the first problem. `name` is the file it came from, if not known."""
        from copyir.validate import validate_stream

        if name is not None and self.source is None:
            self.source = name
        validate_stream(self)

    def depth(self, loop: int) -> int:
        """How many loops enclose an instruction whose innermost is `loop`."""
        depth = 0
        while loop:
            depth += 1
            loop = self.loops[loop - 1].parent
        return depth

    def _header(self) -> tuple:
        return (
            self.kernel,
            self.target,
            self.semaphores,
            self.buffers,
            self.origins,
            self.semaphore_names,
            self.loops,
            self.maps,
            self.predicates,
            self.computes,
            self.labels,
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Stream)
            and self._header() == other._header()
            and self.instructions.dtype == other.instructions.dtype
            and np.array_equal(self.instructions, other.instructions)
        )


def lowering_bug(why: str, where: Loc | None) -> InternalError:
    """A problem in a stream copyir's lowering made: copyir's bug."""
    return InternalError(
        errors.LOWERED_STREAM_INVALID.format(why=why, where=where or "an unknown place")
    )
