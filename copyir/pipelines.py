"""What a pipeline's index maps do over its grid: Pallas' schedule as data.

A pipeline has one of two flavours. `emit_pipeline`'s (the default) walks
its whole grid row-major, the last index fastest, as one schedule: it
ignores `dimension_semantics`, and prefetches across a parallel dimension
like any other, unless it is split over `cores`. Then, as Pallas'
`_partition_grid` does, the first parallel dimension whose extent the core
count divides is cut into equal contiguous shares, one per core; where none
divides, the largest parallel dimension is cut unevenly, the first
`extent % cores` cores taking one step more. Each core runs its own
schedule over its share. The `pallas_call` grid's flavour (`kernel_grid`)
runs one schedule per point of its parallel dimensions (a prefix), as the
cores of a chip run them.

Either way a schedule is a grid of its own: its dimension 0 is the core
(with cores) or its parallel prefix, then the sequential dimensions, and
`user` says which grid point of the pipeline each of its points is (a
core's share starts at its offset). For each operand, a step's block is its
index map at the step's grid point, and the block *changes* at a step when
it differs from the previous step's (every operand changes at the first
step). Pallas' slots are counters that advance when a block changes, so an
operand's slot at a step is its number of changes so far, minus one,
modulo its buffer count.

copyir keeps the schedule as loops, so both must be affine in the grid
indices: for the index maps Pallas users write (a block per grid point, or
one that stays put over the innermost dimensions, as an accumulator's
does), a block changes exactly when the grid dimensions after the
innermost one it follows are all 0, and its count of changes is the
row-major number of the sequential dimensions up to that one. `analyse`
finds that dimension by evaluating the maps over the whole grid (numpy) and
checks the closed forms against the enumeration; a map they do not
describe is a clear error, never a wrong schedule. It also checks block
indices inside the array's block grid, and for the kernel grid what
Pallas' interpret mode checks there: an output block revisited after
another one (data lost), and one shared across a parallel dimension.
`emit_pipeline` checks no revisits: the run finds the races they make.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.ir import SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineMap,
)

from copyir import errors, limits
from copyir.dialects.copy import (
    PARALLEL,
    BufferedRefType,
    PipelineOp,
    describe,
    is_viewed,
    past_end,
    past_end_error,
    viewed_past_end,
    viewed_past_end_error,
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
    aliased: bool = False
    """The operand is in VMEM already: its window is a view of it at the
    block, never copied (Pallas' `BufferedRef.create` allocates no buffer
    when the source's memory space is the window's)."""
    counts: tuple[int, int] = (0, 0)
    """(input, output) buffer counts: how far ahead it fetches, and how
    many steps after a write-back starts it is awaited, plus one; 0 for a
    direction it lacks (an `inout` has both)."""
    lookahead: bool = False
    """An input fetching `fetched - 1` blocks ahead, not steps (Pallas'
    `fetch_with_lookahead`)."""

    @property
    def fetched(self) -> int:
        return self.counts[0]

    @property
    def written(self) -> int:
        return self.counts[1]

    @property
    def buffers(self) -> int:
        return self.bref.buffers.data


@dataclass(frozen=True)
class Schedule:
    grid: tuple[int, ...]
    """The extents of the schedule's dimensions."""
    parallel: int
    """How many leading dimensions are parallel: the kernel grid's parallel
    prefix, or the core (one schedule per point of them)."""
    operands: list[PipelineOperand]
    """Their index maps take the schedule's dimensions."""
    user: tuple[AffineExpr, ...]
    """The pipeline's grid point, in the schedule's dimensions: the body's
    grid indices."""
    origin: int = 0
    """The first core of this schedule, when it runs on some cores only."""

    @property
    def sequential(self) -> tuple[int, ...]:
        return tuple(range(self.parallel, len(self.grid)))

    @property
    def steps(self) -> int:
        """Steps of one schedule (one point of the parallel dimensions)."""
        return math.prod(self.grid[d] for d in self.sequential)

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

    def after(self, operand: PipelineOperand) -> tuple[int, ...]:
        """The sequential dimensions inside the one the operand follows (all
        of them when it follows none): its block stays put while they run."""
        if operand.follows is None:
            return self.sequential
        return tuple(d for d in self.sequential if d > operand.follows)

    def stays(self, operand: PipelineOperand) -> int:
        """The steps the operand's block stays put once it changed: the
        extents of the dimensions `after` the one it follows."""
        return math.prod(self.grid[d] for d in self.after(operand))

    def fetch_distance(self, operand: PipelineOperand) -> int:
        """How many steps ahead an input's fetches are: `fetched - 1`, or
        with lookahead `fetched - 1` blocks, each staying `stays` steps.

        Lookahead (`fetch_with_lookahead`) walks the grid from the last
        fetched point and fetches each block that differs from the one
        before it, until the fetches in flight or unread fill the buffers.
        A block is unread until the step after its last one, so at the step
        a block c changes to, the walk fetches block c + fetched - 1; the
        blocks of a schedule change every `stays` steps, so that block's
        first step is `(fetched - 1) * stays` steps later."""
        ahead = operand.fetched - 1
        return ahead * self.stays(operand) if operand.lookahead else ahead

    def counter_at_step(self, operand: PipelineOperand, offset: int) -> AffineExpr:
        """The counter at the point `offset` steps from the current one, in
        the simplest form: the step number divided by the steps the block
        stays put (equal to `counter` at `at_step(offset)` there)."""
        if operand.follows is None:
            return AffineExpr.constant(0)
        stays = self.stays(operand)
        step = self.linear() + offset
        return step // stays if stays > 1 else step

    def changes(
        self, operand: PipelineOperand, point: list[AffineExpr]
    ) -> list[AffineConstraintExpr]:
        """Constraints (all `== 0`) that hold where the operand's block
        changes at the point."""
        return [
            AffineConstraintExpr(
                AffineConstraintKind.eq, point[d], AffineExpr.constant(0)
            )
            for d in self.after(operand)
        ]

    def block(
        self, operand: PipelineOperand, point: list[AffineExpr]
    ) -> list[AffineExpr]:
        return [
            r.replace_dims_and_symbols(point, []) for r in operand.index_map.results
        ]


@dataclass(frozen=True)
class Plan:
    """A pipeline's schedules: one, or with cores one per group of cores
    that take shares of one size."""

    schedules: list[Schedule]
    cores: int | None
    """With cores, their number: dimension 0 of every schedule, which runs
    on cores `origin` to `origin + grid[0] - 1`."""


def analyse(op: PipelineOp) -> Plan:
    """The pipeline's schedules, or its first problem as a `CopyIRError`."""
    grid = op.grid_shape
    total = limits.iterations(grid)  # the grid is enumerated below: bounded first
    if total > limits.MAX_ITERATIONS:
        raise CopyIRError(
            errors.TOO_MANY_ITERATIONS.format(
                what="The pipeline", count=total, limit=limits.MAX_ITERATIONS
            )
        )
    points = grid_points(grid)
    specs = list(zip(op.specs(), op.ref_specs.data, strict=True))
    blocks = [_blocks(s[0][3].data, list(points)) for s in specs]
    for ((ref, _, bref, _), _), found in zip(specs, blocks, strict=True):
        _check_bounds(ref, bref, found, points)
        viewed = is_viewed(ref)
        if viewed or op.kernel_grid is None:
            _first_past_end(ref, bref, found, points, viewed)
    identity = tuple(AffineExpr.dimension(d) for d in range(len(grid)))
    if op.kernel_grid is not None:
        parallel = len(op.parallel_dims)
        inner = int(np.prod(grid[parallel:]))
        first = np.arange(total) % inner == 0  # each schedule's first step
        outputs = [(s, b) for (s, _), b in zip(specs, blocks, strict=True) if s[1]]
        for number, ((ref, *_), found) in enumerate(outputs):
            _check_parallel_revisit(ref, number, found, points, parallel)
            _check_revisit(number, found, points, first)
        return Plan([_schedule(specs, grid, parallel, identity, known=blocks)], None)
    cores = op.core_count
    if cores is None or cores == 1:
        return Plan([_schedule(specs, grid, 0, identity, known=blocks)], None)
    return Plan(
        [
            _schedule(specs, (count, *shares), 1, user, origin)
            for origin, count, shares, user in partition(op, cores)
        ],
        cores,
    )


def core_copies(op: PipelineOp) -> tuple[int, int]:
    """How a pipeline over cores multiplies its instructions, at most: the
    lowering runs every group's schedule (`partition`) on every core,
    under a `when`, so each grid step's instructions are emitted
    `cores * (sum of the groups' shares) / steps` times (rounded up), and
    each prologue and epilogue `cores * groups` times. (1, 1) without
    cores."""
    cores = op.core_count
    if not cores:
        return 1, 1
    groups = partition(op, cores)
    shares = sum(int(np.prod(share)) for _, _, share, _ in groups)
    steps = int(np.prod(op.grid_shape))
    return -(-cores * shares // steps), cores * len(groups)


def partition(
    op: PipelineOp, cores: int
) -> list[tuple[int, int, tuple[int, ...], tuple[AffineExpr, ...]]]:
    """Pallas' `_partition_grid`: per group of cores, its first core, its
    number of cores, each one's share of the grid, and the grid point at a
    point (core, share indices...) of it."""
    grid = op.grid_shape
    semantics = op.semantics_or_arbitrary()
    parallel = [d for d, s in enumerate(semantics) if s == PARALLEL]
    if not parallel:
        shown = ", ".join(
            f"<GridDimensionSemantics.{s.upper()}: '{s}'>" for s in semantics
        )
        shown += "," if len(semantics) == 1 else ""
        raise CopyIRError(errors.NO_PARALLEL_DIMENSION.format(semantics=f"({shown})"))
    divisible = [d for d in parallel if grid[d] % cores == 0]
    dim = divisible[0] if divisible else max(parallel, key=lambda d: (grid[d], -d))
    base, rest = divmod(grid[dim], cores)
    core = AffineExpr.dimension(0)
    groups = [(0, rest, base + 1, core * (base + 1))] if rest else []
    if base:
        groups.append((rest, cores - rest, base, core * base + rest))
    found = []
    for origin, count, share, offset in groups:
        shares = tuple(share if d == dim else n for d, n in enumerate(grid))
        user = tuple(
            AffineExpr.dimension(d + 1) + (offset if d == dim else 0)
            for d in range(len(grid))
        )
        found.append((origin, count, shares, user))
    return found


def _blocks(affine_map: AffineMap, dims: list[np.ndarray]) -> np.ndarray:
    """(results, points): the map's block indices at every point."""
    total = len(dims[0]) if dims else 1
    if not affine_map.results:
        return np.zeros((0, total), np.int64)
    return np.stack(
        [np.broadcast_to(evaluate(r, dims), (total,)) for r in affine_map.results]
    )


def _schedule(
    specs,
    grid: tuple[int, ...],
    parallel: int,
    user: tuple[AffineExpr, ...],
    origin: int = 0,
    known: list[np.ndarray] | None = None,
) -> Schedule:
    """One schedule over `grid`, whose points are the pipeline's `user`;
    `known`, each operand's blocks at them when `user` is the grid itself
    (`analyse` has them already)."""
    total = int(np.prod(grid))
    points = grid_points(grid)
    points[0] += origin if parallel else 0
    dims = list(points)
    shown = (
        points if known is not None else _blocks(AffineMap(len(grid), 0, user), dims)
    )
    inner = int(np.prod(grid[parallel:]))
    first = np.arange(total) % inner == 0  # each schedule's first step
    operands = []
    counts = {False: 0, True: 0}
    for k, ((ref, output, bref, index_map), spec) in enumerate(specs):
        affine_map = index_map.data.replace_dims_and_symbols(
            list(user), [], len(grid), 0
        )
        found = _blocks(affine_map, dims) if known is None else known[k]
        blocks = found.astype(np.int64)
        number = counts[output]
        counts[output] += 1
        changed = _changes(blocks, first)
        follows = _follows(ref, grid, parallel, points, changed, shown)
        trivial = bref.is_trivial_windowing
        aliased = is_viewed(ref)
        operands.append(
            PipelineOperand(
                ref,
                output,
                number,
                bref,
                affine_map,
                follows,
                trivial,
                aliased,
                spec.counts,
                spec.looks_ahead,
            )
        )
    return Schedule(grid, parallel, operands, user, origin)


def _check_bounds(ref, bref: BufferedRefType, blocks, points) -> None:
    """Every block index inside the array's block grid, at every step."""
    for dim, (block, extent) in enumerate(
        zip(bref.block_dims, bref.get_shape(), strict=True)
    ):
        count = block.count(extent)
        bad = (blocks[dim] < 0) | (blocks[dim] >= count)
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            message = (
                errors.BLOCK_INDEX_OUT_OF_BOUNDS
                if not block.at_element
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


def _first_past_end(ref, bref: BufferedRefType, blocks, points, viewed: bool) -> None:
    """No block reaches past the array's end; else the error at the first
    iteration where one does: a copy's DMA rounded up to the tiling as
    Pallas' BufferedRef rounds it (emit_pipeline's), or, for an operand
    already in the window's space (`viewed`), the whole block."""
    test, error = (
        (viewed_past_end, viewed_past_end_error)
        if viewed
        else (past_end, past_end_error)
    )
    bad = np.array([test(bref, dim, found) for dim, found in enumerate(blocks)])
    if not bad.any():
        return
    at = int(np.flatnonzero(bad.any(axis=0))[0])
    dim = int(np.flatnonzero(bad[:, at])[0])
    message = error(describe(ref), bref, dim, int(blocks[dim][at]))
    raise CopyIRError(f"{message}, in iteration {format_tuple(points[:, at])}")


def _changes(blocks: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Where the block changes: at each schedule's `first` step, and where
    it differs from the previous step's."""
    changed = first.copy()
    changed[1:] |= (blocks[:, 1:] != blocks[:, :-1]).any(axis=0)
    return changed


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
    runs = np.flatnonzero(_changes(blocks, first))
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


def _follows(ref, grid, parallel: int, points, changed, shown) -> int | None:
    """The innermost sequential dimension whose change moves the block, as
    checked against the enumeration; a clear error when none describes it,
    naming the pipeline's grid points (`shown`)."""
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
            + ", ".join(format_tuple(shown[:, s]) for s in steps)
            + ", ...",
        )
    )
