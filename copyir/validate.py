"""The one validator of DMA streams, and where each DMA end lies.

A stream read from a file may have been written by hand or by an attacker,
so before it runs every field is checked against the others: codes in
range, shapes of at least one element, a start's byte count equal to its
elements times its item size (counted without 64-bit overflow), buffers
that do not overlap each other in their memory space, and every DMA end a
box of one buffer: inside it, of the buffer's own dtype, and stepping along
the buffer's dimensions with the buffer's own strides. That last rule is
what makes a stream safe to execute (no view strays outside its buffer, no
destination writes one element twice) and what lets the protocol compare
accesses as boxes, one interval per buffer dimension.

The first problem, in instruction order, is one located `CopyIRError`:
`Malformed DMA stream: ...` at the instruction's line in the file the
stream was read from, or the interpreter's own messages (out of bounds, a
dtype mismatch, not a box) at the instruction's origin.

`resolve_ends` is written over arrays so that instructions in loops, whose
addresses differ per iteration, resolve all their iterations at once.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from copyir import errors, limits
from copyir.compute import check as compute_check
from copyir.dtypes import BY_NAME, DTYPES
from copyir.errors import CopyIRError, Loc
from copyir.expand import Trace, expand
from copyir.index import bounds
from copyir.machine import MAX_RANK, SPACES
from copyir.stream import (
    COMPUTE,
    INVALIDATE,
    OPS,
    START,
    WAIT,
    Buffer,
    Stream,
    lowering_bug,
)
from copyir.tables import small_groups
from copyir.target import BUILTIN

ITEMSIZES = np.array([d.itemsize for d in DTYPES], dtype=np.int64)


@dataclass(frozen=True)
class Ends:
    """DMA ends resolved against the buffers, one row per end.

    `lo` and `hi` bound the box per buffer dimension (dimensions past a
    buffer's rank are padded with [0, 1)); `offset` is the element offset
    of the end's first element in its buffer.
    """

    buffer: np.ndarray
    offset: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


@dataclass(frozen=True)
class Layout:
    """The buffers of a stream, sorted per memory space for lookups."""

    buffers: list[Buffer]
    rank: int
    shapes: np.ndarray
    """(buffers, rank): each buffer's shape, padded with 1s at the end."""
    strides: np.ndarray
    """(buffers, rank): row-major strides in elements, padded with 1s."""
    dtypes: np.ndarray
    starts: dict[int, np.ndarray]
    """Per space code: the buffers' byte addresses, sorted."""
    ids: dict[int, np.ndarray]
    """Per space code: buffer numbers in the order of `starts`."""

    @staticmethod
    def of(buffers: list[Buffer]) -> Layout:
        rank = max([len(b.shape) for b in buffers] + [1])
        shapes = np.ones((len(buffers), rank), np.int64)
        strides = np.ones((len(buffers), rank), np.int64)
        for i, b in enumerate(buffers):
            shapes[i, : len(b.shape)] = b.shape
            step = 1
            for d in reversed(range(len(b.shape))):
                strides[i, d] = step
                step *= b.shape[d]
        codes = {d.name: i for i, d in enumerate(DTYPES)}
        dtypes = np.array([codes[BY_NAME[b.dtype].name] for b in buffers], np.int64)
        starts, ids = {}, {}
        for code, space in enumerate(SPACES):
            members = [i for i, b in enumerate(buffers) if b.space == space]
            members.sort(key=lambda i: buffers[i].address)
            ids[code] = np.array(members, np.int64)
            starts[code] = np.array([buffers[i].address for i in members], np.int64)
        return Layout(buffers, rank, shapes, strides, dtypes, starts, ids)


class StreamProblem(Exception):
    """A problem found at one instruction; the caller locates it."""

    def __init__(self, row: int, message: str, malformed: bool, loc: Loc | None = None):
        super().__init__(message)
        self.row = row
        self.message = message
        self.malformed = malformed
        self.loc = loc


@dataclass(frozen=True)
class Access:
    """One kind of end (sources, destinations, a computation's k-th
    operand) of the events that have it, resolved into boxes.

    `kind` says where an end's static fields live: instruction row
    `kind // width` of the table, and operand `kind % width - 1` of its
    computation (0 for the instruction's own source or destination)."""

    events: np.ndarray
    buffer: np.ndarray
    offset: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    kind: np.ndarray


@dataclass(frozen=True)
class Validated:
    """A stream that passed every check, its loops expanded into events."""

    layout: Layout
    trace: Trace
    src: Access
    """The source of each start."""
    dst: Access
    """The destination of each start, computation and invalidation."""
    operands: list[Access]
    """Per operand position, the computations' operands."""
    width: int
    """The kinds of end per instruction row (see `Access.kind`)."""

    def strides(self, stream: Stream, kind: int, end: str) -> tuple[int, ...]:
        """The strides of a kind of end (`end` is `src` or `dst` for an
        instruction's own)."""
        row, k = divmod(kind, self.width)
        entry = stream.instructions[row]
        if k == 0:
            return tuple(int(x) for x in entry[f"{end}_strides"][: entry["rank"]])
        compute = stream.computes[int(entry["compute"]) - 1]
        return compute.operands[k - 1].strides


def validate_stream(
    stream: Stream, order: Mapping[int, np.ndarray] | None = None
) -> Validated:
    """Check every field of the header, the loops and the instructions,
    expand the loops (`order` as `copyir.expand` takes it), and resolve
    every event's ends; raise the first problem, located (a bad access at
    its origin and iteration)."""
    try:
        layout = check_header(stream)
        check_loops(stream)
        check_instructions(stream)
    except StreamProblem as problem:
        raise locate(stream, problem) from None
    trace = expand(stream, order)
    table = stream.instructions
    op = table["op"][trace.row]
    used = (op == START) | (op == WAIT)
    bad = used & ((trace.sem < 0) | (trace.sem >= stream.semaphores))
    if bad.any():
        event = int(np.flatnonzero(bad)[0])
        raise trace.fail(
            stream,
            event,
            errors.RUN_SEMAPHORE_RANGE.format(
                sem=int(trace.sem[event]), count=stream.semaphores
            ),
        )
    rank = table.dtype["shape"].shape[0]
    width = trace.operands.shape[1] + 1
    shapes = table["shape"].reshape(len(table), rank)

    def access(events, label, space, address, strides, k=0) -> Access:
        """The ends of `events` (`space` and `strides` per instruction row)."""
        kinds = trace.row[events] * width + k
        _, first, kind = small_groups(kinds)
        rows = trace.row[events[first]]
        fields = EndKinds(
            table["dtype"][rows],
            table["rank"][rows],
            shapes[rows],
            strides[rows],
            space[rows],
        )
        try:
            ends = resolve_ends(layout, label, fields, kind, address)
        except StreamProblem as problem:
            raise trace.fail(
                stream, int(events[problem.row]), problem.message
            ) from None
        return Access(events, ends.buffer, ends.offset, ends.lo, ends.hi, kinds)

    starts = np.flatnonzero(op == START)
    boxed = np.flatnonzero(op != WAIT)
    src = access(
        starts,
        "source",
        table["src_space"],
        trace.src_address[starts],
        table["src_strides"].reshape(len(table), rank),
    )
    dst = access(
        boxed,
        "destination",
        table["dst_space"],
        trace.dst_address[boxed],
        table["dst_strides"].reshape(len(table), rank),
    )
    computes = np.flatnonzero(op == COMPUTE)
    compute_of = table["compute"].astype(np.int64)
    operands = []
    for k in range(width - 1):
        # Per instruction row, this operand's space and strides (if any).
        spaces = np.zeros(len(table), np.int64)
        strides = np.zeros((len(table), rank), np.int64)
        has = np.zeros(len(table), bool)
        for row in np.flatnonzero(compute_of):
            spec = stream.computes[compute_of[row] - 1].operands
            if k < len(spec):
                has[row] = True
                spaces[row] = SPACES.index(spec[k].space)
                strides[row, : len(spec[k].strides)] = spec[k].strides
        events = computes[has[trace.row[computes]]]
        operands.append(
            access(
                events,
                "operand",
                spaces,
                trace.operands[events, k],
                strides,
                k + 1,
            )
        )
    return Validated(layout, trace, src, dst, operands, width)


def locate(stream: Stream, problem: StreamProblem) -> Exception:
    """The problem as a user sees it: where the instruction is written (for
    a malformed field) or where it came from (for a bad access). A
    malformed field in a stream copyir's lowering made is copyir's bug."""
    row = problem.row
    if problem.malformed and stream.lowered:
        where = problem.loc or (stream.origin(row).loc if row >= 0 else None)
        why = f"instruction {row}: {problem.message}" if row >= 0 else problem.message
        return lowering_bug(why, where)
    if not problem.malformed and row >= 0:
        origin = stream.origin(row)
        if origin.loc is not None:
            message = problem.message
            if origin.detail:
                message = f"{message}, at {origin.detail}"
            return CopyIRError(message, origin.loc)
    where = problem.loc or stream.written_at(row)
    message = problem.message
    if problem.malformed:
        prefix = f"instruction {row}: " if where is None and row >= 0 else ""
        message = errors.STREAM_MALFORMED.format(why=prefix + message)
    if where is None and stream.source is not None:
        where = Loc(stream.source, 1, 1)
    return CopyIRError(message, where)


# -- the header: buffers and semaphores -----------------------------------------


def check_header(stream: Stream) -> Layout:
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
    return Layout.of(stream.buffers)


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
    if not len(stream.loops) or not len(loops):
        return
    if loops.min() < 0 or loops.max() > len(stream.loops):
        row = int(np.flatnonzero((loops < 0) | (loops > len(stream.loops)))[0])
        raise StreamProblem(row, f"loop {loops[row]} of {len(stream.loops)}", True)
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
    """Every instruction's own fields."""
    table = stream.instructions
    rank = table.dtype["shape"].shape[0] if table.dtype["shape"].shape else 1
    op = table["op"].astype(np.int64)
    start = op == START
    boxed = np.isin(op, (START, INVALIDATE, COMPUTE))
    static_sem = np.isin(op, (START, WAIT)) & (table["sem_map"] == 0)
    problems: list[tuple[np.ndarray, object]] = [
        (~np.isin(op, OPS), lambda r: f"unknown instruction code {op[r]}"),
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
    src_space, dst_space = table["src_space"], table["dst_space"]
    dtype, ranks = table["dtype"].astype(np.int64), table["rank"].astype(np.int64)
    problems += [
        (
            (start & (src_space >= len(SPACES))) | (boxed & (dst_space >= len(SPACES))),
            lambda r: f"unknown memory space code {max(src_space[r], dst_space[r])}",
        ),
        (
            boxed & (dtype >= len(DTYPES)),
            lambda r: f"unknown element type code {dtype[r]}",
        ),
        (boxed & (ranks > rank), lambda r: f"rank {ranks[r]} in a table of {rank}"),
        (
            start & (table["priority"] > 1),
            lambda r: f"priority {table['priority'][r]}",
        ),
    ]
    first = _first(problems)
    shape = table["shape"].reshape(len(table), rank)
    used = np.arange(rank)[None, :] < ranks[:, None]
    elements = np.where(used, shape, 1)
    problems = [
        (
            boxed & ((elements < 1) | (elements >= limits.LIMIT)).any(axis=1),
            lambda r: f"bad shape {shape[r, : ranks[r]].tolist()}",
        ),
    ]
    first = _earliest(first, _first(problems))
    count = np.prod(np.clip(elements, 1, limits.LIMIT).astype(np.float64), axis=1)
    item = ITEMSIZES[np.clip(dtype, 0, len(DTYPES) - 1)]
    huge = start & (count * item >= limits.LIMIT)
    exact = np.prod(np.where(huge[:, None], 1, elements), axis=1) * item
    problems = [
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
    first = _earliest(first, _first(problems))
    if first is not None:
        raise StreamProblem(first[0], first[1], True)


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
    for column, items, dims, fit in (
        ("src_map", stream.maps, map_dims, map_fits),
        ("dst_map", stream.maps, map_dims, map_fits),
        ("sem_map", stream.maps, map_dims, map_fits),
        ("predicate", stream.predicates, set_dims, set_fits),
    ):
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
    dtype = table["dtype"].astype(np.int64)
    hbm = SPACES.index("hbm")
    problems.append(
        ((op == COMPUTE) & (table["dst_space"] == hbm), lambda r: errors.HBM_STORE)
    )
    for number, each in enumerate(stream.computes, start=1):
        rows = (op == COMPUTE) & (compute == number)
        problems += _expression_problems(each, rows, dtype)
        if any(operand.space == "hbm" for operand in each.operands):
            problems.append((rows, lambda r: errors.HBM_LOAD))
        for operand in each.operands:
            if (
                operand.space not in SPACES
                or not 0 <= operand.map <= len(stream.maps)
                or not map_fits[operand.map]
                or (
                    operand.map and (rows & (map_dims[operand.map] != rows_depth)).any()
                )
            ):
                problems.append(
                    (rows, lambda r: f"a bad operand of compute {compute[r]}")
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
            compute_check(each.expression, DTYPES[code], len(each.operands))
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
        (maps, ("src_map", "dst_map", "sem_map")),
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


def _first(problems) -> tuple[int, str] | None:
    """The earliest row with a problem, and its message (the first check
    listed wins at one row)."""
    best = None
    for mask, message in problems:
        rows = np.flatnonzero(mask)
        if rows.size and (best is None or rows[0] < best[0]):
            best = (int(rows[0]), message)
    return None if best is None else (best[0], best[1](best[0]))


def _earliest(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a if a[0] <= b[0] else b


# -- DMA ends ------------------------------------------------------------------------


@dataclass(frozen=True)
class EndKinds:
    """The static fields of each kind of end (one instruction's source,
    say): every end of a kind has its kind's dtype code, rank, shape and
    strides (padded to one width) and memory space; only the byte address
    varies, per iteration inside loops."""

    dtype: np.ndarray
    rank: np.ndarray
    shape: np.ndarray
    strides: np.ndarray
    space: np.ndarray


def resolve_ends(
    layout: Layout,
    label: str,
    kinds: EndKinds,
    kind: np.ndarray,
    address: np.ndarray,
) -> Ends:
    """Where each DMA end lies: its buffer, element offset and box.

    One row per end: its kind (a row of `kinds`) and byte address. `label`
    names the ends in messages (`source`). Raises the first end that is out
    of bounds, of another dtype than its buffer, or not a box, as a
    `StreamProblem` at its row. What depends only on the kind (the extent
    of a box in bytes, whether it is too large to address) is worked out
    once per kind, not per end.
    """
    count = len(address)
    ranks = kinds.rank.astype(np.int64)
    used = np.arange(kinds.shape.shape[1])[None, :] < ranks[:, None]
    shape = np.where(used, kinds.shape, 1)
    strides = np.where(used, kinds.strides, 0)
    item_k = ITEMSIZES[kinds.dtype.astype(np.int64)]
    reach = ((shape - 1).astype(np.float64) * np.abs(strides)).sum(axis=1)
    huge_k = reach * item_k >= limits.LIMIT
    steps = np.where(huge_k[:, None], 0, (shape - 1) * strides)
    below = item_k * np.minimum(steps, 0).sum(axis=1)
    above = item_k * (np.maximum(steps, 0).sum(axis=1) + 1)
    item, huge, space = item_k[kind], huge_k[kind], kinds.space[kind]
    lo_byte = address + below[kind]
    hi_byte = address + above[kind]
    buffer = np.full(count, -1, np.int64)
    for code, starts in layout.starts.items():
        mine = space == code
        if starts.size and mine.any():
            at = np.searchsorted(starts, lo_byte[mine], side="right") - 1
            buffer[mine] = np.where(at >= 0, layout.ids[code][np.maximum(at, 0)], -1)
    sizes = np.array([b.nbytes for b in layout.buffers] + [0], np.int64)
    bases = np.array([b.address for b in layout.buffers] + [0], np.int64)
    base, size = bases[buffer], sizes[buffer]
    outside = huge | (buffer < 0) | (lo_byte >= base + size)
    past = ~outside & (hi_byte > base + size)
    wrong_dtype = (
        ~outside
        & ~past
        & (
            (layout.dtypes[np.maximum(buffer, 0)] != kinds.dtype[kind])
            | ((address - base) % item != 0)
        )
    )

    def region(r: int) -> str:
        return f"{SPACES[space[r]]}[{lo_byte[r]}:{hi_byte[r]}]"

    def out_of_bounds(r: int) -> str:
        if outside[r]:
            why = f"it lies outside every {SPACES[space[r]]} buffer"
        else:
            b = layout.buffers[buffer[r]]
            why = (
                f"it runs past the end of buffer {b.name} "
                f"({b.space}[{b.address}:{b.address + b.nbytes}])"
            )
        return errors.RUN_OUT_OF_BOUNDS.format(end=label, region=region(r), why=why)

    def mismatch(r: int) -> str:
        b = layout.buffers[buffer[r]]
        if layout.dtypes[buffer[r]] == kinds.dtype[kind[r]]:  # same, misaligned
            return errors.RUN_MISALIGNED.format(
                end=label,
                region=region(r),
                name=b.name,
                offset=int((address[r] - base[r]) % item[r]),
                item=int(item[r]),
            )
        return errors.RUN_MISMATCHED_BUFFER.format(
            end=label,
            dtype=DTYPES[kinds.dtype[kind[r]]].name,
            name=b.name,
            held=b.dtype,
        )

    if not layout.buffers and count:
        raise StreamProblem(0, out_of_bounds(0), False)
    bad = outside | past | wrong_dtype
    safe_buffer = np.where(bad, 0, buffer)
    offset = np.where(bad, 0, (address - base) // item)
    lo, hi, not_box = _boxes(layout, safe_buffer, offset, shape, strides, kind)
    not_box &= ~bad

    def not_a_box(r: int) -> str:
        b = layout.buffers[buffer[r]]
        k = kind[r]
        return errors.RUN_NOT_A_BOX.format(
            end=label,
            region=region(r),
            name=b.name,
            shape=list(b.shape),
            extents=shape[k, : ranks[k]].tolist(),
            strides=strides[k, : ranks[k]].tolist(),
        )

    first = _first(
        [
            (outside | past, out_of_bounds),
            (wrong_dtype, mismatch),
            (not_box, not_a_box),
        ]
    )
    if first is not None:
        raise StreamProblem(first[0], first[1], False)
    return Ends(buffer, offset, lo, hi)


def _boxes(layout: Layout, buffer, offset, shape, strides, kind):
    """Each end as one [lo, hi) per buffer dimension, and which ends are not
    boxes. The mapping of DMA dimensions onto buffer dimensions depends only
    on the buffer and the kind's shape and strides (rows of `shape` and
    `strides`), so it is worked out once per (kind, buffer) and applied to
    all its ends at once."""
    key = kind.astype(np.int64) * len(layout.buffers) + buffer
    _, firsts, group = small_groups(key)
    # Per combination: the extent along each buffer dimension, whether it
    # must start at 0 there, and whether it is no box at all.
    rank = layout.shapes.shape[1]
    extent = np.ones((len(firsts), rank), np.int64)
    from_zero = np.zeros((len(firsts), rank), bool)
    never = np.zeros(len(firsts), bool)
    for number, row in enumerate(firsts.tolist()):
        extents = _dimension_extents(
            layout.buffers[buffer[row]].shape, shape[kind[row]], strides[kind[row]]
        )
        if extents is None:
            never[number] = True
            continue
        for dim, (size, zero) in extents.items():
            extent[number, dim], from_zero[number, dim] = size, zero
    # A column at a time, with per-combination tables gathered by `group`:
    # no (ends, rank) temporaries, and nothing done for a dimension where
    # every buffer has extent 1 or no box can fall short or run over.
    shapes, bstrides = layout.shapes[buffer[firsts]], layout.strides[buffer[firsts]]
    lo = np.zeros((len(buffer), rank), np.int64)
    hi = np.ones((len(buffer), rank), np.int64)
    not_box = never[group] if never.any() else np.zeros(len(buffer), bool)
    for d in range(rank):
        if (shapes[:, d] == 1).all():
            continue
        stride, extent_d = bstrides[:, d], shapes[:, d]
        if (stride == stride[0]).all() and (extent_d == extent_d[0]).all():
            lo[:, d] = offset // stride[0] % extent_d[0]  # scalars: fast division
        else:
            lo[:, d] = offset // stride[group] % extent_d[group]
        hi[:, d] = lo[:, d] + extent[group, d]
        if from_zero[:, d].any():
            not_box |= from_zero[group, d] & (lo[:, d] != 0)
        room = shapes[:, d] - extent[:, d]  # the last start that fits
        if (room < shapes[:, d] - 1).any():
            not_box |= lo[:, d] > room[group]
    return lo, hi, not_box


def _dimension_extents(
    buffer_shape, shape, strides
) -> dict[int, tuple[int, bool]] | None:
    """For a DMA of `shape` and `strides` (in elements) over a buffer, the
    extent it covers in each buffer dimension it steps along, and whether it
    must start there at 0 (a DMA dimension that spans several buffer
    dimensions, such as 16 contiguous elements of 8-element rows); None
    when the DMA's elements cannot form a box of the buffer."""
    dims, bstrides, step = list(buffer_shape), [], 1
    for extent in reversed(dims):
        bstrides.append(step)
        step *= extent
    bstrides.reverse()
    covered: dict[int, tuple[int, bool]] = {}
    for extent, stride in zip(shape, strides, strict=True):
        extent, stride = int(extent), int(stride)
        if extent == 1:
            continue
        dim = next(
            (d for d, s in enumerate(bstrides) if s == stride and dims[d] > 1), None
        )
        if dim is None:
            return None
        while extent > dims[dim]:  # spans whole rows of the next dimension out
            if extent % dims[dim] or dim in covered or dim == 0:
                return None
            covered[dim] = (dims[dim], True)
            extent //= dims[dim]
            dim -= 1
            while dim > 0 and dims[dim] == 1:
                dim -= 1
        if dim in covered:
            return None
        covered[dim] = (extent, False)
    return covered
