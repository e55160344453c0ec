"""What a pipeline's index maps do over its grid: Pallas' schedule as data.

A pipeline walks its grid row-major, the last index fastest; the parallel
dimensions (a prefix) are split across cores, so the schedule runs over the
sequential dimensions once per point of the parallel ones. For each
operand, a step's block is its index map at the step's grid point, and the
block *changes* at a step when it differs from the previous step's (every
operand changes at the first step). Pallas' slots are counters that
advance when a block changes, so an operand's slot at a step is its
number of changes so far, minus one, modulo its buffer count.

copyir keeps the schedule as loops, so both must be affine in the grid
indices: for the index maps Pallas users write (a block per grid point, or
one that stays put over the innermost dimensions, as an accumulator's
does), a block changes exactly when the grid dimensions after the
innermost one it follows are all 0, and its count of changes is the
row-major number of the sequential dimensions up to that one. `analyse`
finds that dimension by evaluating the maps over the whole grid (numpy) and
checks the closed forms against the enumeration; a map they do not
describe is a clear error, never a wrong schedule. It also checks what
Pallas does not: block indices inside the array's block grid, an output
block revisited after another one (data lost), and an output block shared
across a parallel dimension.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineMap,
    AffineSet,
)

from copyir import errors, limits
from copyir.dialects.copy import (
    ELEMENT,
    SQUEEZED,
    BufferedRefType,
    PipelineOp,
    describe,
)
from copyir.errors import CopyIRError, format_tuple
from copyir.index import evaluate, grid_points, row_major_strides


@dataclass(frozen=True)
class PipelineOperand:
    """One operand's part of the schedule.

    `follows` is the innermost sequential grid dimension whose change moves
    the block (None: the block moves only at the first step of each
    schedule); `changes` says at which grid points the block changes,
    `counter` how many changes came before, both affine in the grid
    indices (d0 the outermost)."""

    ref: SSAValue
    output: bool
    number: int
    """Among the inputs, or among the outputs, in spec order."""
    bref: BufferedRefType
    index_map: AffineMap
    follows: int | None
    trivial: bool
    """The block is the whole array: copied once before (an input) or
    after (an output) the pipeline."""

    @property
    def buffers(self) -> int:
        return self.bref.buffers.data


@dataclass(frozen=True)
class Schedule:
    grid: tuple[int, ...]
    parallel: int
    """How many leading grid dimensions are parallel."""
    operands: list[PipelineOperand]

    @property
    def sequential(self) -> tuple[int, ...]:
        return tuple(range(self.parallel, len(self.grid)))

    @property
    def steps(self) -> int:
        """Steps of one schedule (one point of the parallel dimensions)."""
        count = 1
        for d in self.sequential:
            count *= self.grid[d]
        return count

    def linear(self) -> AffineExpr:
        """The step number inside a schedule: row-major over the sequential
        dimensions."""
        return self.number_of(self.sequential)

    def strides(self, dims: tuple[int, ...]) -> tuple[int, ...]:
        """Row-major strides of the given dimensions of the grid."""
        return row_major_strides([self.grid[d] for d in dims])

    def number_of(self, dims: tuple[int, ...]) -> AffineExpr:
        """Row-major number of the given dimensions' indices."""
        expr = AffineExpr.constant(0)
        for d, stride in reversed(tuple(zip(dims, self.strides(dims), strict=True))):
            expr = expr + AffineExpr.dimension(d) * stride
        return expr

    def at_step(self, offset: int) -> list[AffineExpr]:
        """The grid point `offset` steps after the current one, as affine
        expressions (parallel dimensions unchanged; only meaningful while it
        stays inside the schedule)."""
        step = self.linear() + offset
        point = [AffineExpr.dimension(d) for d in range(self.parallel)]
        strides = self.strides(self.sequential)
        for k, (d, stride) in enumerate(zip(self.sequential, strides, strict=True)):
            index = step // stride if stride > 1 else step
            point.append(
                index % self.grid[d] if k else index
            )  # the outermost needs no mod
        return point

    def counter(self, operand: PipelineOperand, point: list[AffineExpr]) -> AffineExpr:
        """The operand's count of changes before the point (its slot is this
        modulo its buffer count)."""
        if operand.follows is None:
            return AffineExpr.constant(0)
        dims = tuple(range(self.parallel, operand.follows + 1))
        return self.number_of(dims).replace_dims_and_symbols(point, [])

    def counter_at_step(self, operand: PipelineOperand, offset: int) -> AffineExpr:
        """The counter at the point `offset` steps from the current one, in
        the simplest form: the step number divided by the steps the block
        stays put (equal to `counter` at `at_step(offset)` there)."""
        if operand.follows is None:
            return AffineExpr.constant(0)
        stays = 1
        for d in self.sequential:
            if d > operand.follows:
                stays *= self.grid[d]
        step = self.linear() + offset
        return step // stays if stays > 1 else step

    def changes(
        self, operand: PipelineOperand, point: list[AffineExpr]
    ) -> list[AffineConstraintExpr]:
        """Constraints (all `== 0`) that hold where the operand's block
        changes at the point."""
        after = (
            self.sequential
            if operand.follows is None
            else tuple(d for d in self.sequential if d > operand.follows)
        )
        return [
            AffineConstraintExpr(
                AffineConstraintKind.eq, point[d], AffineExpr.constant(0)
            )
            for d in after
        ]

    def block(
        self, operand: PipelineOperand, point: list[AffineExpr]
    ) -> list[AffineExpr]:
        return [
            r.replace_dims_and_symbols(point, []) for r in operand.index_map.results
        ]


def conjunction(grid: int, constraints: list[AffineConstraintExpr]) -> AffineSet:
    return AffineSet(grid, 0, tuple(constraints))


def analyse(op: PipelineOp) -> Schedule:
    """The pipeline's schedule, or its first problem as a `CopyIRError`."""
    grid = op.grid_shape
    parallel = len(op.parallel_dims)
    total = limits.iterations(grid)  # the grid is enumerated below: bounded first
    if total > limits.MAX_ITERATIONS:
        raise CopyIRError(
            errors.TOO_MANY_ITERATIONS.format(
                what="The pipeline", count=total, limit=limits.MAX_ITERATIONS
            )
        )
    points = grid_points(grid)
    dims = list(points)
    inner = int(np.prod(grid[parallel:]))
    first = np.arange(total) % inner == 0  # each schedule's first step
    operands = []
    counts = {False: 0, True: 0}
    for ref, output, bref, index_map in op.specs():
        affine_map = index_map.data
        blocks = (
            np.stack(
                [
                    np.broadcast_to(evaluate(r, dims), (total,))
                    for r in affine_map.results
                ]
            )
            if affine_map.results
            else np.zeros((0, total), np.int64)
        )
        _check_bounds(ref, bref, blocks, points)
        blocks = blocks.astype(np.int64)  # inside the block grid: no wrapping
        number = counts[output]
        counts[output] += 1
        if output:
            _check_parallel_revisit(ref, number, blocks, points, parallel)
            _check_revisit(number, blocks, points, first)
        changed = first.copy()
        changed[1:] |= (blocks[:, 1:] != blocks[:, :-1]).any(axis=0)
        follows = _follows(ref, grid, parallel, points, changed, first)
        trivial = bref.is_trivial_windowing
        operands.append(
            PipelineOperand(ref, output, number, bref, affine_map, follows, trivial)
        )
    return Schedule(grid, parallel, operands)


def _check_bounds(ref, bref: BufferedRefType, blocks, points) -> None:
    """Every block index inside the array's block grid, at every step."""
    for dim, (block, extent) in enumerate(
        zip(bref.block_dims, bref.get_shape(), strict=True)
    ):
        kind = block.kind.data
        count = extent if kind in (ELEMENT, SQUEEZED) else -(-extent // block.size.data)
        bad = (blocks[dim] < 0) | (blocks[dim] >= count)
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            message = (
                errors.BLOCK_INDEX_OUT_OF_BOUNDS
                if kind != ELEMENT
                else errors.ELEMENT_INDEX_OUT_OF_BOUNDS
            )
            raise CopyIRError(
                message.format(
                    index=int(blocks[dim][at]),
                    dim=dim,
                    bref=describe(ref),
                    extent=count,
                )
                + f", in iteration {format_tuple(points[:, at])}"
            )


def _first_visits(keys: np.ndarray) -> np.ndarray:
    """For each column of `keys`, the first column equal to it."""
    if not keys.shape[0]:  # a rank-0 operand: one block, always
        return np.zeros(keys.shape[1], np.int64)
    _, inverse = np.unique(keys.T, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    first = np.full(inverse.max(initial=-1) + 1, keys.shape[1], np.int64)
    np.minimum.at(first, inverse, np.arange(keys.shape[1]))
    return first[inverse]


def _check_revisit(number: int, blocks, points, first) -> None:
    """Pallas' interpret-mode check: an output block visited again after
    another block loses what the first visit wrote."""
    steps = blocks.shape[1]
    starts = first.copy()
    starts[1:] |= (blocks[:, 1:] != blocks[:, :-1]).any(axis=0)
    runs = np.flatnonzero(starts)
    ends = np.concatenate([runs[1:], [steps]]) - 1
    earlier = _first_visits(blocks[:, runs])
    again = np.flatnonzero(earlier != np.arange(len(runs)))
    if again.size:
        k = int(again[0])
        start, before = runs[k], int(earlier[k])
        raise CopyIRError(
            errors.REVISITED.format(
                block=format_tuple(blocks[:, start]),
                output=number,
                iteration=format_tuple(points[:, start]),
                first=format_tuple(points[:, runs[before]]),
                last=format_tuple(points[:, ends[before]]),
            )
        )


def _check_parallel_revisit(ref, number: int, blocks, points, parallel: int) -> None:
    """An output block written from two points of a parallel dimension: on
    hardware, two cores writing one block."""
    if not parallel:
        return
    first = _first_visits(blocks)
    for dim in range(parallel):
        differs = np.flatnonzero(points[dim] != points[dim, first])
        if differs.size:
            at = int(differs[0])
            raise CopyIRError(
                errors.PARALLEL_REVISIT.format(
                    output=number,
                    name=describe(ref),
                    block=format_tuple(blocks[:, at]),
                    first=format_tuple(points[:, first[at]]),
                    second=format_tuple(points[:, at]),
                    dim=dim,
                )
            )


def _follows(ref, grid, parallel: int, points, changed, first) -> int | None:
    """The innermost sequential dimension whose change moves the block, as
    checked against the enumeration; a clear error when none describes it."""
    sequential = list(range(parallel, len(grid)))
    for follows in [None, *sequential]:
        after = (
            sequential if follows is None else [d for d in sequential if d > follows]
        )
        predicted = np.ones(points.shape[1], bool)
        for d in after:
            predicted &= points[d] == 0
        if np.array_equal(predicted, changed):
            return follows
    steps = np.flatnonzero(changed)[:4]
    raise CopyIRError(
        errors.IRREGULAR_INDEX_MAP.format(
            name=describe(ref),
            why="it changes at iterations "
            + ", ".join(format_tuple(points[:, s]) for s in steps)
            + ", ...",
        )
    )
