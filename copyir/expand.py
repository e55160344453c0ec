"""A stream's loops expanded into events: every execution of an instruction.

An event is (instruction, iteration): the row of the instruction and the
indices of its enclosing loops. Each instruction's iterations are the
points of its loops' domain (row-major, last index fastest) where its
predicate holds, all found at once with numpy; its addresses and
semaphore id are its affine maps evaluated there. Program order is then
one lexicographic sort: at each level of nesting, the position of the item
(an instruction or a loop) in its body, then that loop's index. A loop
marked parallel may be given an order of its own (`order`), which the sort
uses in place of its index, so that its iterations run permuted without
the stream changing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from copyir.errors import CopyIRError
from copyir.index import evaluate, grid_points, holds
from copyir.stream import COMPUTE, Stream


@dataclass(frozen=True)
class Trace:
    """The events of a stream, in program order."""

    row: np.ndarray
    """The instruction row of each event."""
    indices: np.ndarray
    """(events, depth): the enclosing loops' indices, outermost first (0s
    pad an instruction nested less deeply)."""
    sem: np.ndarray
    src_address: np.ndarray
    dst_address: np.ndarray
    operands: np.ndarray
    """(events, most operands): the computations' operand addresses."""

    @property
    def count(self) -> int:
        return len(self.row)

    def iteration(self, stream: Stream, event: int) -> str:
        """`i = 7, j = 2` for an event inside loops, else ''."""
        loops = chain(stream, int(stream.instructions["loop"][self.row[event]]))
        values = self.indices[event]
        return ", ".join(
            f"{stream.loops[loop - 1].name} = {int(values[level])}"
            for level, loop in enumerate(loops)
        )

    def fail(self, stream: Stream, event: int, message: str, notes=()) -> CopyIRError:
        """An error at an event: at its instruction's origin, with the
        origin's detail and the iteration after the message."""
        origin = stream.origin(int(self.row[event]))
        if origin.detail:
            message = f"{message}, at {origin.detail}"
        if iteration := self.iteration(stream, event):
            message = f"{message}, at {iteration}"
        return CopyIRError(message, origin.loc, notes)


def chain(stream: Stream, loop: int) -> list[int]:
    """The loops around a row whose innermost loop is `loop`, outermost
    first (1-based numbers)."""
    loops = []
    while loop:
        loops.append(loop)
        loop = stream.loops[loop - 1].parent
    return loops[::-1]


def expand(stream: Stream, order: Mapping[int, np.ndarray] | None = None) -> Trace:
    """Every event of the stream, in program order (see the module's doc).

    `order[loop]` gives, for a parallel loop, the position at which each of
    its iterations runs.
    """
    table = stream.instructions
    rows = np.arange(len(table))
    depth = max([stream.depth(int(x)) for x in range(len(stream.loops) + 1)])
    widest = max([len(c.operands) for c in stream.computes] + [0])
    if not len(table) or (not stream.loops and not table["predicate"].any()):
        # a flat stream without conditions: the rows are the events
        return Trace(
            rows,
            np.zeros((len(table), 0), np.int64),
            table["sem"].astype(np.int64),
            table["src_address"].astype(np.int64),
            table["dst_address"].astype(np.int64),
            _flat_operands(stream, widest),
        )
    first_row = _first_rows(stream)
    parts = []
    loop_of = table["loop"].astype(np.int64)
    for loop in np.unique(loop_of):
        loops = chain(stream, int(loop))
        trips = [stream.loops[x - 1].trip_count for x in loops]
        points = grid_points(trips) if loops else np.zeros((0, 1), np.int64)
        for row in rows[loop_of == loop]:
            parts.append(
                _events(
                    stream,
                    int(row),
                    loops,
                    points,
                    first_row,
                    order or {},
                    depth,
                    widest,
                )
            )
    keys = np.concatenate([p[0] for p in parts], axis=1)
    sort = np.lexsort(keys[::-1])
    fields = [np.concatenate([p[1][k] for p in parts])[sort] for k in range(6)]
    return Trace(*fields)


def executions(stream: Stream, op: int) -> int:
    """How many events the instructions of kind `op` have, counted per
    instruction (its loops' points where its predicate holds) without
    expanding the stream."""
    table = stream.instructions
    total = 0
    for row in np.flatnonzero(table["op"] == op):
        loops = chain(stream, int(table["loop"][row]))
        trips = [stream.loops[x - 1].trip_count for x in loops]
        predicate = int(table["predicate"][row])
        if predicate:
            points = list(grid_points(trips) if trips else np.zeros((0, 1), np.int64))
            total += int(holds(stream.predicates[predicate - 1], points).sum())
        else:
            total += math.prod(trips)
    return total


def _first_rows(stream: Stream) -> np.ndarray:
    """The first row inside each loop (1-based; index 0 unused)."""
    first = np.full(len(stream.loops) + 1, -1, np.int64)
    for row, loop in enumerate(stream.instructions["loop"].tolist()):
        while loop:
            if first[loop] < 0:
                first[loop] = row
            loop = stream.loops[loop - 1].parent
    return first


def _events(stream, row, loops, points, first_row, order, depth, widest):
    """One instruction's events: its sort keys and its fields."""
    entry = stream.instructions[row]
    dims = list(points)
    count = points.shape[1]
    keep = np.ones(count, bool)
    if entry["predicate"]:
        keep = holds(stream.predicates[int(entry["predicate"]) - 1], dims)
    dims = [d[keep] for d in dims]
    count = int(keep.sum())
    keys = np.zeros((2 * depth + 1, count), np.int64)
    for level, loop in enumerate(loops):
        keys[2 * level] = first_row[loop]
        position = dims[level]
        if loop in order:
            position = order[loop][position]
        keys[2 * level + 1] = position
    keys[2 * len(loops)] = row
    indices = np.zeros((count, depth), np.int64)
    for level, values in enumerate(dims):
        indices[:, level] = values

    def field(column: str, map_column: str) -> np.ndarray:
        if entry[map_column]:
            expr = stream.maps[int(entry[map_column]) - 1].results[0]
            return np.broadcast_to(evaluate(expr, dims), (count,)).astype(np.int64)
        return np.full(count, int(entry[column]), np.int64)

    operands = np.zeros((count, widest), np.int64)
    if entry["op"] == COMPUTE:
        for k, operand in enumerate(
            stream.computes[int(entry["compute"]) - 1].operands
        ):
            if operand.map:
                expr = stream.maps[operand.map - 1].results[0]
                operands[:, k] = evaluate(expr, dims)
            else:
                operands[:, k] = operand.address
    fields = (
        np.full(count, row, np.int64),
        indices,
        field("sem", "sem_map"),
        field("src_address", "src_map"),
        field("dst_address", "dst_map"),
        operands,
    )
    return keys, fields


def _flat_operands(stream: Stream, widest: int) -> np.ndarray:
    table = stream.instructions
    operands = np.zeros((len(table), widest), np.int64)
    for row in np.flatnonzero(table["op"] == COMPUTE):
        compute = stream.computes[int(table["compute"][row]) - 1]
        for k, operand in enumerate(compute.operands):
            operands[row, k] = operand.address
    return operands
