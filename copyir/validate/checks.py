"""The validator's checks of a stream's own fields: header, loops, rows."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np

from copyir import dma_schema as schema
from copyir import errors, limits
from copyir.compute import check_expression
from copyir.dtypes import BY_NAME, DTYPES
from copyir.errors import CopyIRError
from copyir.index import bounds
from copyir.machine import MAX_RANK, SPACES
from copyir.stream import (
    COMPUTE,
    OPAQUE,
    START,
    WAIT,
    Buffer,
    Stream,
)
from copyir.target import BUILTIN
from copyir.validate.boxes import ITEMSIZES, BufferIndex
from copyir.validate.problems import StreamProblem, first_problem

# -- the header: buffers and semaphores -----------------------------------------


def check_header(stream: Stream) -> BufferIndex:
    def bad(why: str, buffer: Buffer | None = None) -> StreamProblem:
        return StreamProblem(-1, why, True, buffer.loc if buffer else None)

    table = stream.instructions
    if table.ndim != 1 or table.dtype.names is None or "op" not in table.dtype.names:
        raise bad("its instruction table is not a table")
    if not 0 <= stream.semaphores < limits.LIMIT:
        raise bad(f"a semaphore count of {stream.semaphores}")
    names = set()
    for buffer in stream.buffers:
        if buffer.name in names:
            raise bad(f"buffer {buffer.name} is declared twice", buffer)
        names.add(buffer.name)
        check_buffer(buffer, stream.target, bad)
    check_disjoint(stream.buffers, bad)
    for named in stream.semaphore_names:
        if (
            any(d < 1 for d in named.shape)
            or not named.first >= 0
            or named.first + named.count > stream.semaphores
        ):
            raise bad(
                f"semaphore {named.name} beyond the program's {stream.semaphores}"
            )
    _check_semaphore_names(stream.semaphore_names, bad)
    return BufferIndex.of(stream.buffers)


def _check_semaphore_names(named: list, bad) -> None:
    """Each name once, each semaphore under one name at most: a name is how
    a report calls a semaphore."""
    seen = set()
    for each in named:
        if each.name in seen:
            raise bad(f"semaphore {each.name} is declared twice")
        seen.add(each.name)
    spans = sorted((each.first, each.first + each.count, each.name) for each in named)
    for (_, stop, name), (start, _, other) in itertools.pairwise(spans):
        if start < stop:
            raise bad(f"semaphores {name} and {other} share semaphore {start}")


def check_buffer(buffer: Buffer, target: str, bad) -> None:
    """One buffer's own fields (`bad(why, buffer)` makes the problem)."""
    if buffer.space not in SPACES:
        raise bad(
            f"buffer {buffer.name} has an unknown memory space {buffer.space!r}", buffer
        )
    if buffer.dtype not in BY_NAME:
        raise bad(
            f"buffer {buffer.name} has an unknown element type {buffer.dtype}", buffer
        )
    if len(buffer.shape) > MAX_RANK or any(d < 1 for d in buffer.shape):
        raise bad(f"buffer {buffer.name} has a bad shape {list(buffer.shape)}", buffer)
    item = BY_NAME[buffer.dtype].itemsize
    if (
        not 0 <= buffer.address < limits.LIMIT
        or buffer.address + buffer.nbytes >= limits.LIMIT
    ):
        raise bad(f"buffer {buffer.name} has a bad address or size", buffer)
    if buffer.address % item:
        raise bad(
            f"buffer {buffer.name} is not aligned to its {item}-byte elements", buffer
        )
    if target in BUILTIN:
        capacity = BUILTIN[target].capacity(buffer.space)
        if buffer.address + buffer.nbytes > capacity:
            raise bad(
                f"buffer {buffer.name} ends past the {buffer.space} capacity "
                f"of target {target} ({capacity} bytes)",
                buffer,
            )


def check_disjoint(buffers: list[Buffer], bad) -> None:
    """Buffers in one memory space do not share a byte: the protocol keys
    accesses by buffer, and copyir's lowering never makes such buffers."""
    for space in SPACES:
        members = sorted(
            (b for b in buffers if b.space == space), key=lambda b: b.address
        )
        for a, b in itertools.pairwise(members):
            if b.address < a.address + a.nbytes:
                raise bad(
                    f"buffers {a.name} ({space}[{a.address}:{a.address + a.nbytes}]) "
                    f"and {b.name} ({space}[{b.address}:{b.address + b.nbytes}]) "
                    "overlap",
                    b,
                )


# -- loops ---------------------------------------------------------------------------


def check_loops(stream: Stream) -> None:
    """Loops form a tree, each runs at least once, no nest runs more than
    MAX_ITERATIONS times, the instructions run no more than MAX_EVENTS
    times in all (copyir.limits: what verify refuses for a program), and
    the rows inside a loop are contiguous."""

    def bad(why: str) -> StreamProblem:
        return StreamProblem(-1, why, True)

    runs = [1]  # per loop number (0: no loop), its nest's iterations
    for number, loop in enumerate(stream.loops, start=1):
        if not 0 <= loop.parent < number:
            raise bad(f"loop {loop.name} has parent {loop.parent}")
        if not 1 <= loop.trip_count < limits.LIMIT:
            raise bad(f"loop {loop.name} runs {loop.trip_count} times")
        total = loop.trip_count * runs[loop.parent]
        if total > limits.MAX_ITERATIONS:
            raise bad(
                f"loop {loop.name} runs {total} times in all, more than the "
                f"limit of {limits.MAX_ITERATIONS}"
            )
        runs.append(total)
    loops = stream.instructions["loop"]
    outside = (loops < 0) | (loops > len(stream.loops))
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise StreamProblem(row, f"loop {loops[row]} of {len(stream.loops)}", True)
    if not len(stream.loops) or not len(loops):
        return
    per_loop = np.bincount(loops, weights=_weights(stream)).astype(np.int64)
    events = sum(w * runs[x] for x, w in enumerate(per_loop.tolist()))
    if events > limits.MAX_EVENTS:
        raise bad(
            f"its instructions run {events} times in all, more than the limit "
            f"of {limits.MAX_EVENTS}"
        )
    seen_end: dict[int, int] = {}
    for row, loop in enumerate(loops.tolist()):
        while loop:
            if loop in seen_end and seen_end[loop] != row - 1:
                raise StreamProblem(row, f"loop {loop}'s rows are not contiguous", True)
            seen_end[loop] = row
            loop = stream.loops[loop - 1].parent


def _weights(stream: Stream) -> np.ndarray:
    """Per row, the events one execution counts for (`limits.weight`)."""
    table = stream.instructions
    per_compute = [limits.weight(len(c.operands)) for c in stream.computes]
    per_compute = np.array([1, *per_compute], np.int64)
    number = table["compute"].astype(np.int64)
    known = (table["op"] == COMPUTE) & (number >= 1) & (number <= len(stream.computes))
    return per_compute[np.where(known, number, 0)]


# -- instructions ------------------------------------------------------------------


def check_instructions(stream: Stream) -> None:
    """Every instruction's own fields. The checks are listed so that a
    message reads only fields that the checks before it found sound (a
    code in range before it names a dtype): of the rows with a problem,
    the first reports its first check's."""
    table = stream.instructions
    rank = table.dtype["shape"].shape[0] if table.dtype["shape"].shape else 1
    op = table["op"].astype(np.int64)
    start = op == START
    boxed = np.isin(op, schema.having("shape"))
    static_sem = np.isin(op, schema.having("sem")) & (table["sem_map"] == 0)
    problems: list[tuple[np.ndarray, object]] = [
        *_code_problems(table, op),
        *_reference_problems(stream),
        (
            static_sem & ((table["sem"] < 0) | (table["sem"] >= stream.semaphores)),
            lambda r: (
                f"semaphore {table['sem'][r]} in a program of {stream.semaphores}"
            ),
        ),
        (
            (table["origin"] < -1) | (table["origin"] >= len(stream.origins)),
            lambda r: f"origin {table['origin'][r]} of {len(stream.origins)}",
        ),
        (
            (op == WAIT) & (table["bytes"] < 0),
            lambda r: "a wait for a negative number of bytes",
        ),
    ]
    dtype, ranks = table["dtype"].astype(np.int64), table["rank"].astype(np.int64)
    problems.append(
        (boxed & (ranks > rank), lambda r: f"rank {ranks[r]} in a table of {rank}")
    )
    shape = table["shape"].reshape(len(table), rank)
    used = np.arange(rank)[None, :] < ranks[:, None]
    elements = np.where(used, shape, 1)
    problems.append(
        (
            boxed & ((elements < 1) | (elements >= limits.LIMIT)).any(axis=1),
            lambda r: f"bad shape {shape[r, : ranks[r]].tolist()}",
        )
    )
    count = np.prod(np.clip(elements, 1, limits.LIMIT).astype(np.float64), axis=1)
    item = ITEMSIZES[np.clip(dtype, 0, len(DTYPES) - 1)]
    huge = start & (count * item >= limits.LIMIT)
    exact = np.prod(np.where(huge[:, None], 1, elements), axis=1) * item
    problems += [
        (huge, lambda r: f"a start of more than {limits.LIMIT} bytes"),
        (
            start & ~huge & (table["bytes"] != exact),
            lambda r: (
                f"a start of {shape[r, : ranks[r]].tolist()} "
                f"{DTYPES[dtype[r]].name} elements that moves {table['bytes'][r]} "
                f"bytes, not {exact[r]}"
            ),
        ),
    ]
    first = first_problem(problems)
    if first is not None:
        raise StreamProblem(first[0], first[1], True)


def _code_problems(table: np.ndarray, op: np.ndarray) -> list:
    """Each code column (`dma_schema.Column.codes`) in range, in the rows
    whose instruction holds it: the instruction code first, as it says
    which columns a row holds."""
    problems = []
    for column in schema.columns():
        if column.codes is None:
            continue
        values = table[column.name].astype(np.int64)
        held = column in schema.CONTEXT or np.isin(op, schema.having(column.name))
        problems.append(
            (
                held & ((values < 0) | (values >= column.codes)),
                lambda r, c=column, v=values: c.bad_code(int(v[r])),
            )
        )
    return problems


def _reference_problems(stream: Stream) -> list[tuple[np.ndarray, object]]:
    """The 1-based references of each row: in range, and maps and
    predicates over as many dimensions as loops enclose the row."""
    table = stream.instructions
    op = table["op"].astype(np.int64)
    depth = np.array([stream.depth(int(x)) for x in range(len(stream.loops) + 1)])
    rows_depth = depth[np.clip(table["loop"], 0, len(stream.loops))]
    problems = []

    def dims_of(items, dims) -> np.ndarray:
        return np.array([-1] + [dims(x) for x in items], np.int64)

    map_extents, set_extents = _extents(stream)

    def fits(exprs, extents: list[int], limit: int | None = limits.LIMIT) -> bool:
        """Every value the expressions take over the loops of the rows that
        use them is a 64-bit integer (with room for an address's sums), and
        none divides by zero or by an index. A predicate is evaluated
        exactly (`index.holds`), never made an address: no limit."""
        return all(bounds(expr, extents, limit) is not None for expr in exprs)

    map_dims = dims_of(
        stream.maps,
        lambda m: m.num_dims if len(m.results) == 1 and not m.num_symbols else -2,
    )
    set_dims = dims_of(
        stream.predicates,
        lambda sets: (
            sets[0].num_dims
            if sets
            and all(s.num_dims == sets[0].num_dims and not s.num_symbols for s in sets)
            else -2
        ),
    )
    map_fits = np.array(
        [True] + [fits(m.results, map_extents[k]) for k, m in enumerate(stream.maps, 1)]
    )
    set_fits = np.array(
        [True]
        + [
            fits(
                (e for s in sets for c in s.constraints for e in (c.lhs, c.rhs)),
                set_extents[k],
                None,
            )
            for k, sets in enumerate(stream.predicates, 1)
        ]
    )
    for column, items, dims, fit in [
        *((column, stream.maps, map_dims, map_fits) for column in schema.MAP_COLUMNS),
        ("predicate", stream.predicates, set_dims, set_fits),
    ]:
        ids = table[column].astype(np.int64)
        count = len(items)
        out = (ids < 0) | (ids > count)
        problems.append((out, lambda r, c=column, n=count: f"{c} {table[c][r]} of {n}"))
        used = ~out & (ids > 0)
        wrong = used & (dims[np.where(out, 0, ids)] != rows_depth)
        problems.append(
            (
                wrong,
                lambda r, c=column: (
                    f"{c} {table[c][r]} does not fit {rows_depth[r]} enclosing loops"
                ),
            )
        )
        problems.append(
            (
                used & ~fit[np.where(out, 0, ids)],
                lambda r, c=column: (
                    f"{c} {table[c][r]} takes values beyond 64 bits, or divides "
                    "by zero or by an index"
                ),
            )
        )
    compute = table["compute"].astype(np.int64)
    problems.append(
        (
            ((op == COMPUTE) & ((compute < 1) | (compute > len(stream.computes))))
            | ((op != COMPUTE) & (compute != 0)),
            lambda r: f"compute {compute[r]} of {len(stream.computes)}",
        )
    )
    label = table["label"].astype(np.int64)
    problems.append(
        (
            ((op == OPAQUE) & ((label < 1) | (label > len(stream.labels))))
            | ((op != OPAQUE) & (label != 0)),
            lambda r: f"label {label[r]} of {len(stream.labels)}",
        )
    )
    dtype = table["dtype"].astype(np.int64)
    hbm = SPACES.index("hbm")
    writes = (op == COMPUTE) | ((op == OPAQUE) & table["writes"])
    problems.append((writes & (table["dst_space"] == hbm), lambda r: errors.HBM_STORE))
    problems.append(
        (
            (op == OPAQUE) & ~table["writes"] & (table["dst_space"] == hbm),
            lambda r: errors.HBM_LOAD,
        )
    )
    for number, each in enumerate(stream.computes, start=1):
        rows = (op == COMPUTE) & (compute == number)
        problems += _expression_problems(each, rows, dtype)
        if any(operand.space == "hbm" for operand in each.operands):
            problems.append((rows, lambda r: errors.HBM_LOAD))
        for operand in each.operands:
            # An operand is a box of its row's shape: as many strides as dims.
            unlike = rows & (table["rank"] != len(operand.strides))
            if (
                operand.space not in SPACES
                or not 0 <= operand.map <= len(stream.maps)
                or not map_fits[operand.map]
                or (
                    operand.map and (rows & (map_dims[operand.map] != rows_depth)).any()
                )
            ):
                unlike = rows
            problems.append(
                (unlike, lambda r: f"a bad operand of compute {compute[r]}")
            )
    return problems


def _expression_problems(each, rows: np.ndarray, dtype: np.ndarray) -> list:
    """A computation's expression holds the verifier's rules in the dtype of
    each row that runs it (a hand-made stream may break them: an operand
    that does not exist, `-` on bool, a literal out of range)."""
    problems = []
    for code in np.unique(dtype[rows]).tolist():
        if not 0 <= code < len(DTYPES):
            continue  # the row's own check reports it
        try:
            try:
                expression = each.tree
            except ValueError as err:
                raise CopyIRError(errors.COMPUTE_MALFORMED.format(why=err)) from None
            check_expression(expression, DTYPES[code], len(each.operands))
        except CopyIRError as err:
            problems.append((rows & (dtype == code), lambda r, why=err.message: why))
    return problems


def _extents(stream: Stream) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Per map and per predicate (1-based), the trip count of each dimension
    it takes: the most of the loops at that depth around the rows that use
    it, so that its bounds are those of the values it takes, as the
    verifier's are for the program (a reference out of range is reported
    elsewhere). Worked out per distinct (map, innermost loop), not per row."""
    maps: dict[int, list[int]] = defaultdict(list)
    sets: dict[int, list[int]] = defaultdict(list)

    def widen(found: dict[int, list[int]], key: int, trips: list[int]) -> None:
        have = found[key]
        for level, trip in enumerate(trips):
            if level < len(have):
                have[level] = max(have[level], trip)
            else:
                have.append(trip)

    table = stream.instructions
    loops = len(stream.loops)
    loop = table["loop"].astype(np.int64)
    trips_of = {}
    for number in np.unique(loop).tolist():
        trips, at = [], number
        while 0 < at <= loops and len(trips) <= loops:
            trips.append(stream.loops[at - 1].trip_count)
            at = stream.loops[at - 1].parent
        trips_of[number] = trips[::-1]
    for found, columns in (
        (maps, schema.MAP_COLUMNS),
        (sets, ("predicate",)),
    ):
        for column in columns:
            pairs = np.unique(
                np.column_stack([table[column].astype(np.int64), loop]), axis=0
            )
            for key, number in pairs.tolist():
                widen(found, key, trips_of[number])
    computes = len(stream.computes)
    number = table["compute"].astype(np.int64)
    known = (number >= 1) & (number <= computes)
    pairs = np.unique(np.column_stack([number[known], loop[known]]), axis=0)
    for compute, at in pairs.tolist():
        for operand in stream.computes[compute - 1].operands:
            widen(maps, operand.map, trips_of[at])
    return maps, sets
