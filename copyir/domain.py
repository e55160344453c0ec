"""Iteration domains: the points at which an op inside loops runs.

An op inside `copy.for` loops (and `copy.when` conditions) runs once per
point of its enclosing loops' index space, row-major with the last index
fastest, where every enclosing condition holds. The verifier checks what
depends on loop indices (view bounds, semaphore and block indices, slots,
overlaps) at every such point, with numpy, in chunks so that memory stays
bounded, and names the first point where a check fails, in the order the
program would reach it.

Dimensions are numbered per kernel (`copyir.access.Accesses.dim`), so a
condition or an index expression is an affine function of those numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from xdsl.ir.affine import AffineSet

from copyir.index import grid_points, holds

CHUNK_POINTS = 1 << 20
"""Points evaluated at once."""


@dataclass(frozen=True)
class Loop:
    dim: int
    lower: int
    upper: int
    name: str


@dataclass(frozen=True)
class Domain:
    """The enclosing loops, outermost first, and the enclosing conditions
    (each an `or` of sets over the kernel's loop dimensions)."""

    loops: tuple[Loop, ...] = ()
    conditions: tuple[tuple[AffineSet, ...], ...] = ()
    copies: int = 1
    """How many times the lowering emits each point's instructions, at
    most (a pipeline over cores runs every group's copy of its body on
    every core, under `when`s): what the events count, not the checks."""

    def inside(self, loops: list[Loop], copies: int = 1) -> Domain:
        return Domain((*self.loops, *loops), self.conditions, self.copies * copies)

    def when(self, sets: tuple[AffineSet, ...]) -> Domain:
        return Domain(self.loops, (*self.conditions, sets), self.copies)

    @property
    def size(self) -> int:
        size = 1
        for loop in self.loops:
            size *= loop.upper - loop.lower
        return size

    def chunks(self) -> Iterator[dict[int, np.ndarray]]:
        """The domain's points, in program order, as each loop's values
        (keyed by dimension number: only the domain's own loops, whatever
        the numbers, so that the work does not grow with the kernel's other
        loops; only the points where every condition holds)."""
        trips = [loop.upper - loop.lower for loop in self.loops]
        total = self.size
        for start in range(0, total, CHUNK_POINTS):
            flat = np.arange(start, min(total, start + CHUNK_POINTS), dtype=np.int64)
            values = grid_points(trips, flat) if trips else ()
            dims = {
                loop.dim: value + loop.lower
                for loop, value in zip(self.loops, values, strict=True)
            }
            keep = np.ones(len(flat), bool)
            for sets in self.conditions:
                keep &= holds(sets, dims)
            if keep.any():
                yield {dim: d[keep] for dim, d in dims.items()}

    def first(
        self, bad: Callable[[dict[int, np.ndarray]], np.ndarray]
    ) -> dict[int, int] | None:
        """The first point, in program order, at which `bad(dims)` holds
        (dims keyed by dimension number), as each loop's index."""
        for dims in self.chunks():
            shape = next(iter(dims.values())).shape if dims else (1,)
            mask = np.broadcast_to(np.asarray(bad(dims)), shape)
            if mask.any():
                at = int(np.flatnonzero(mask)[0])
                return {loop.dim: int(dims[loop.dim][at]) for loop in self.loops}
        return None

    def name(self, point: dict[int, int]) -> str:
        """`i = 7, j = 2`."""
        return ", ".join(f"{loop.name} = {point[loop.dim]}" for loop in self.loops)
