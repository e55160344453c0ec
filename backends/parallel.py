"""The claim of a parallel loop, checked: its iterations are independent.

A loop marked parallel (`parallel=` on a grid, a parallel pipeline
dimension) says that its iterations may run in any order, or at once on
several cores. The claim holds when, within one execution of the loop:

- an iteration reads only what it wrote itself before the read, or what
  no other iteration writes (so what it reads was there before the loop);
- no two iterations write the same HBM element (VMEM and SMEM that each
  iteration writes before it reads are scratch, and may be reused);
- a DMA is started and finished in one iteration (its wait is in the
  iteration of its start, and no DMA of the loop is left to a wait outside
  it, nor one from outside to a wait inside);
- scratch that two iterations write is dead after the execution: what it
  holds then is the last iteration's to run, so a later read of it, before
  it is written again, depends on their order.

The check runs on the program in its own order and names both iterations
and both sites, whatever the completion mode. It is the race search of
`overlaps` again, with other windows: each access stays open from its event
to the end of its execution of the loop, and accesses of one iteration
never conflict (its `event` is the iteration's number). Loops nested in
parallel loops are checked a parallel level at a time, sibling loops in one
search, so the cost is a few passes over the accesses per level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from copyir import errors
from copyir.errors import CopyIRError, Note
from copyir.stream import Stream
from copyir.tables import group_rows, small_groups

from . import coverage, overlaps


@dataclass(frozen=True)
class Level:
    """Events inside a parallel loop that `depth` parallel loops enclose,
    with the iteration each belongs to."""

    inside: np.ndarray
    """Per event: inside such a loop."""
    loop: np.ndarray
    """Per event: the loop's number (0 outside)."""
    group: np.ndarray
    """Per event: a number per (loop, execution, iteration); -1 outside."""
    end: np.ndarray
    """Per event: the event after the last of its execution of the loop."""


def levels(stream: Stream, rows: np.ndarray, indices: np.ndarray) -> list[Level]:
    """The parallel levels of a program's events (`Trace.row`,
    `Trace.indices`), outermost first; none without parallel loops."""
    innermost = stream.instructions["loop"].astype(np.int64)[rows]
    chains = {0: []}
    for number in range(1, len(stream.loops) + 1):
        parent = stream.loops[number - 1].parent
        chains[number] = [*chains[parent], number]
    parallel = {
        number: [
            (level, loop)
            for level, loop in enumerate(chain)
            if stream.loops[loop - 1].parallel
        ]
        for number, chain in chains.items()
    }
    deepest = max((len(p) for p in parallel.values()), default=0)
    return [_level(innermost, indices, parallel, depth) for depth in range(deepest)]


def _level(innermost, indices, parallel, depth: int) -> Level:
    count = len(innermost)
    loop = np.zeros(count, np.int64)
    position = np.full(count, -1, np.int64)  # the loop's level in the chain
    for number in np.unique(innermost).tolist():
        if len(parallel[number]) > depth:
            at = innermost == number
            position[at], loop[at] = parallel[number][depth]
    inside = position >= 0
    events = np.flatnonzero(inside)
    width = indices.shape[1]
    # An execution is a run of events of one loop with equal outer
    # indices; an iteration, a run with the loop's index equal too (both
    # are contiguous in program order, and in any permuted order).
    columns = np.arange(width)
    outer = np.where(columns[None, :] < position[events, None], indices[events], -1)
    own = indices[events, np.maximum(position[events], 0)] if width else outer[:, :0]
    key = np.column_stack([loop[events], outer])
    new_execution = np.ones(len(events), bool)
    new_execution[1:] = (key[1:] != key[:-1]).any(axis=1)
    new_iteration = new_execution.copy()
    if width:
        new_iteration[1:] |= own[1:] != own[:-1]
    group = np.full(count, -1, np.int64)
    group[events] = np.cumsum(new_iteration) - 1
    execution = np.cumsum(new_execution) - 1
    last = np.concatenate([np.flatnonzero(new_execution)[1:], [len(events)]]) - 1
    end = np.zeros(count, np.int64)
    if len(events):
        end[events] = events[last][execution] + 1
    return Level(inside, loop, group, end)


@dataclass(frozen=True)
class Violation:
    """A broken claim: at the later event, with its message."""

    event: int
    build: Callable[[], CopyIRError]


def first_violation(
    stream, parallel_levels, events, ends, memory, starts, finish, namer, stats=None
):
    """The first broken claim in program order, or None (`stats`, an
    `overlaps.Stats`, counts the searches' work)."""
    found: list[tuple[int, int, Callable[[], CopyIRError]]] = []
    for level in parallel_levels:
        found += _dma_violations(stream, level, events, starts, finish, namer)
        found += _access_violations(stream, level, ends, memory, namer, stats)
        found += _leftover_violations(stream, level, ends, memory, namer)
    if not found:
        return None
    event, _, build = min(found, key=lambda f: f[:2])
    return Violation(event, build)


def _dma_violations(stream, level: Level, events, starts, finish, namer):
    """A DMA whose start and finishing wait are not in one iteration."""
    waited = finish < events.count
    s, f = starts[waited], finish[waited]
    bad = np.flatnonzero(level.group[s] != level.group[f])
    if not len(bad):
        return []
    k = bad[np.argmin(f[bad])]
    start, wait = int(s[k]), int(f[k])

    def build() -> CopyIRError:
        loop = int(level.loop[wait] or level.loop[start])
        where = (
            f"in iteration {namer.iteration(start)}"
            if level.inside[start]
            else "outside the loop"
        )
        message = errors.PARALLEL_DMA.format(where=where, loop=_loop_name(stream, loop))
        return namer.fail(
            wait, message, (Note("the DMA started here", namer.site(start).loc),)
        )

    return [(wait, 0, build)]


@dataclass(frozen=True)
class _Taking:
    """The accesses that take part in a level's search: rows of
    `protocol.BoxAccesses`, each as a read or a write, with the box it is
    checked by (a read's part that its own iteration did not write,
    bounded)."""

    rows: np.ndarray
    write: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def __getitem__(self, at) -> _Taking:
        return _Taking(self.rows[at], self.write[at], self.lo[at], self.hi[at])


def _access_violations(stream, level: Level, ends, memory, namer, stats=None):
    """Reads of another iteration's writes, and HBM written twice."""
    rows = np.flatnonzero(level.inside[ends.event])
    if not len(rows):
        return []
    group = level.group[ends.event[rows]]
    covered, lo, hi = _own_covered(ends, memory, rows, group)
    uncovered = ends.read[rows] & ~covered
    # Every write takes part with its box; every read its own iteration
    # did not cover, with the part it did not cover (a DMA that adds
    # reads and writes its destination: it takes part twice).
    writes = np.flatnonzero(ends.write[rows])
    reads = np.flatnonzero(uncovered)
    taking = _Taking(
        np.concatenate([rows[writes], rows[reads]]),
        np.concatenate([np.ones(len(writes), bool), np.zeros(len(reads), bool)]),
        np.concatenate([ends.lo[rows[writes]], lo[reads]]),
        np.concatenate([ends.hi[rows[writes]], hi[reads]]),
    )
    taking = _first_of_each(ends, level, taking)
    hbm = np.array([b.space == "hbm" for b in stream.buffers], bool)
    found = []
    for shared in (False, True):  # HBM, then VMEM and SMEM
        mine = taking[hbm[ends.buffer[taking.rows]] != shared]
        if not len(mine.rows):
            continue
        event = ends.event[mine.rows]
        accesses = overlaps.AccessWindows(
            ends.buffer[mine.rows],
            mine.lo,
            mine.hi,
            mine.write,
            event,
            level.end[event],
            level.group[event],
        )
        conflict = overlaps.first_conflict(accesses, stats, bipartite=shared)
        if conflict is None:
            continue
        pair = mine[[conflict.later, conflict.earlier]]
        found.append(
            (int(event[conflict.later]), 1, _conflict(stream, level, ends, pair, namer))
        )
    return found


def _first_of_each(ends, level: Level, taking: _Taking) -> _Taking:
    """The accesses that stand for all: per execution, box and kind (read
    or write), the first access of each of the first two iterations that
    make one. Every access of an iteration meets every access of another
    (their windows span the execution), and accesses of one iteration never
    conflict, so the earliest conflict is among these; an iteration that
    writes one block many times, or a thousand iterations that reuse one
    scratch box, cost two rows, not a quadratic number of candidate pairs."""
    taking = taking[np.argsort(ends.event[taking.rows], kind="stable")]
    event = ends.event[taking.rows]
    box = [ends.buffer[taking.rows], taking.write, taking.lo, taking.hi]
    first, _ = group_rows(np.column_stack([level.group[event], *box]))
    first = np.sort(first)  # the first access of each iteration to each box
    taking, event = taking[first], event[first]
    _, kind = group_rows(np.column_stack([level.end[event], *(b[first] for b in box)]))
    # Rows are in program order, so a box's iterations come in order: keep
    # the first two rows of each kind.
    order = np.argsort(kind, kind="stable")
    sorted_kind = kind[order]
    start = np.searchsorted(sorted_kind, sorted_kind, side="left")
    rank = np.empty(len(kind), np.int64)
    rank[order] = np.arange(len(kind)) - start
    return taking[rank < 2]


def _leftover_violations(stream, level: Level, ends, memory, namer):
    """Scratch that two iterations of one execution write holds, after the
    execution, what the one that ran last wrote: a read of it after the
    execution, before it is written again, depends on their order (an
    element of HBM written twice is reported where it is written)."""
    scratch = np.array([b.space != "hbm" for b in stream.buffers], bool)
    rows = np.flatnonzero(level.inside[ends.event] & ends.write & scratch[ends.buffer])
    if len(rows) < 2:
        return []
    written = _written_twice(ends, memory, level, rows)
    if not len(written.lo):
        return []
    hit = _first_leftover_read(ends, memory, written)
    if hit is None:
        return []
    read, element = hit

    def build() -> CopyIRError:
        event = int(ends.event[read])
        # The execution that left the element: the last one before the read.
        mine = (written.lo <= element) & (element < written.hi)
        mine &= written.end <= event
        end = int(written.end[mine].max())
        writers = written.runs_owner[
            (written.runs_end == end)
            & (written.runs_lo <= element)
            & (element < written.runs_hi)
        ]
        writers = writers[np.argsort(ends.event[writers], kind="stable")]
        groups = level.group[ends.event[writers]]
        first = int(writers[0])
        second = int(writers[np.flatnonzero(groups != groups[0])[0]])
        buffer = int(ends.buffer[read])
        index = np.unravel_index(
            element - int(memory.bases[buffer]), tuple(memory.shapes[buffer])
        )
        names = [namer.iteration(int(ends.event[w])) for w in (first, second)]
        message = errors.PARALLEL_LEFTOVER.format(
            loop=_loop_name(stream, int(level.loop[ends.event[first]])),
            what=_what(ends, read),
            region=namer.region(buffer, ends.lo[read], ends.hi[read]),
            element=namer.element(buffer, tuple(int(i) for i in index)),
            first=names[0],
            second=names[1],
        )
        notes = tuple(
            Note(
                errors.PARALLEL_WRITER.format(iteration=name),
                namer.site(int(ends.event[w])).loc,
            )
            for w, name in zip((first, second), names, strict=True)
        )
        return namer.fail(event, message, notes)

    return [(int(ends.event[read]), 1, build)]


@dataclass(frozen=True)
class _WrittenTwice:
    """Intervals of global elements that two iterations of one execution
    write, with the execution's end; and the write runs they came from."""

    lo: np.ndarray
    hi: np.ndarray
    end: np.ndarray
    runs_lo: np.ndarray
    runs_hi: np.ndarray
    runs_end: np.ndarray
    runs_owner: np.ndarray


def _written_twice(ends, memory, level: Level, rows) -> _WrittenTwice:
    """Where two iterations of an execution write (or invalidate) the same
    element: each iteration's runs made disjoint, then counted across the
    iterations of each execution in one sweep."""
    runs = ends.runs(memory, rows)
    owner = rows[runs.owner]
    event = ends.event[owner]
    group, end = level.group[event], level.end[event]
    # Each iteration's union: rebased so that an iteration's runs lie past
    # the one before's (groups are numbered densely, in program order).
    base = int(runs.lo.min())
    span = int(runs.hi.max()) - base + 1
    _, _, rank = small_groups(group)
    offset = rank * span - base
    order = np.argsort(runs.lo + offset, kind="stable")
    lo, hi = runs.lo[order] + offset[order], runs.hi[order] + offset[order]
    reach = np.maximum.accumulate(hi)
    # Runs of two buffers that touch stay apart: a leftover is looked for
    # per buffer, from the buffer its interval starts in.
    buffer = ends.buffer[owner[order]]
    new = np.concatenate([[True], (lo[1:] > reach[:-1]) | (buffer[1:] != buffer[:-1])])
    last = np.concatenate([np.flatnonzero(new)[1:] - 1, [len(lo) - 1]])
    starts, stops = lo[new], reach[last]
    kept = order[new]
    starts, stops = starts - offset[kept], stops - offset[kept]
    ends_of = end[kept]
    # Across iterations: +1 where an interval starts, -1 where it stops
    # (stops first at one element), per execution.
    count = len(starts)
    at = np.concatenate([starts, stops])
    delta = np.concatenate([np.ones(count, np.int64), -np.ones(count, np.int64)])
    execution = np.concatenate([ends_of, ends_of])
    order = np.lexsort((delta, at, execution))
    at, delta, execution = at[order], delta[order], execution[order]
    depth = np.cumsum(delta)
    twice = (depth[:-1] >= 2) & (at[1:] > at[:-1]) & (execution[1:] == execution[:-1])
    return _WrittenTwice(
        at[:-1][twice],
        at[1:][twice],
        execution[:-1][twice],
        runs.lo,
        runs.hi,
        end,
        owner,
    )


def _first_leftover_read(ends, memory, written: _WrittenTwice):
    """The first read, after an execution, of an element it left written
    twice and that nothing wrote since: (its row, the element), or None.
    Replayed over the few buffers concerned, from their first such
    execution's end."""
    bases = memory.bases
    buffer_of = np.searchsorted(bases, written.lo, side="right") - 1
    since = np.full(len(bases), np.iinfo(np.int64).max)
    np.minimum.at(since, buffer_of, written.end)
    rows = np.flatnonzero((ends.read | ends.write) & (ends.event >= since[ends.buffer]))
    reads = rows[ends.read[rows]]
    if not len(reads):
        return None
    runs = ends.runs(memory, rows)
    owner = rows[runs.owner]
    # Per element run, in program order: the execution's mark (it leaves
    # the elements written twice) before the event's reads before its
    # writes (a DMA that adds reads its destination first).
    is_read = ends.read[owner] & ~ends.write[owner]
    add = ends.read[owner] & ends.write[owner]
    time = np.concatenate([written.end, ends.event[owner], ends.event[owner[add]]])
    role = np.concatenate(
        [
            np.zeros(len(written.lo), np.int64),
            np.where(is_read, 1, 2),
            np.ones(int(add.sum()), np.int64),
        ]
    )
    lo = np.concatenate([written.lo, runs.lo, runs.lo[add]])
    hi = np.concatenate([written.hi, runs.hi, runs.hi[add]])
    who = np.concatenate([np.full(len(written.lo), -1), owner, owner[add]])
    clean = coverage.IntervalSet()
    clean.add(int(lo.min()), int(hi.max()))
    for k in np.lexsort((lo, role, time)).tolist():
        a, b = int(lo[k]), int(hi[k])
        if role[k] == 0:
            clean.remove(a, b)
        elif role[k] == 2:
            clean.add(a, b)
        elif (missing := clean.first_missing(a, b)) is not None:
            return int(who[k]), missing
    return None


def _what(ends, row: int) -> str:
    if ends.instant[row]:
        return "invalidation" if ends.invalidate[row] else "computation"
    return "DMA"


def _conflict(stream, level: Level, ends, pair: _Taking, namer):
    """The error for a conflict: the later access, then the earlier."""

    def build() -> CopyIRError:
        row, other_row = int(pair.rows[0]), int(pair.rows[1])
        event, other = int(ends.event[row]), int(ends.event[other_row])
        words = {
            "what": _what(ends, row),
            "action": "writes" if pair.write[0] else "reads",
            "region": namer.region(int(ends.buffer[row]), ends.lo[row], ends.hi[row]),
            "other": namer.iteration(other),
            "their": "writes" if pair.write[1] else "reads",
            "loop": _loop_name(stream, int(level.loop[event])),
        }
        template = (
            errors.PARALLEL_WRITES
            if pair.write[0] and pair.write[1]
            else errors.PARALLEL_READS
        )
        note = errors.PARALLEL_OTHER_ACCESS.format(**words)
        return namer.fail(
            event, template.format(**words), (Note(note, namer.site(other).loc),)
        )

    return build


def _own_covered(ends, memory, rows: np.ndarray, group: np.ndarray):
    """Per row: whether it is a read that writes of its own iteration, at
    earlier events, cover whole (so no other iteration's write can reach
    it); and the box of what they leave uncovered (bounded: the read's own
    box where none of it is covered)."""
    covered = np.zeros(len(rows), bool)
    lo, hi = ends.lo[rows].copy(), ends.hi[rows].copy()
    r = np.flatnonzero(ends.read[rows])
    if not len(r):
        return covered, lo, hi
    # One iteration's buffer is a place (numbered densely, so that a place
    # and an event make one int64); within it, program order.
    _, _, place = small_groups(group * len(memory.shapes) + ends.buffer[rows])
    event = ends.event[rows]
    span = int(event.max()) + 2
    at = place * span + event
    write = ends.write[rows] & ~ends.invalidate[rows]
    invalid = ends.invalidate[rows]
    w = np.flatnonzero(write)
    # Exactly the box of the last earlier write of its iteration with that
    # box, and no invalidation of the buffer since: covered.
    boxes = coverage.box_keys(ends.buffer[rows], ends.lo[rows], ends.hi[rows])
    keys = boxes.view(np.int64)
    c = _last_equal_before(place[w], keys[w], event[w], place[r], keys[r], event[r])
    found = c >= 0
    c = w[np.maximum(c, 0)]
    found &= (ends.lo[rows[c]] == ends.lo[rows[r]]).all(axis=1)
    found &= (ends.hi[rows[c]] == ends.hi[rows[r]]).all(axis=1)
    marks = np.sort(at[invalid])
    since = np.searchsorted(marks, at[c], side="right")
    found &= np.searchsorted(marks, at[r], side="left") <= since
    covered[r[found]] = True
    # A read with no earlier write to its iteration's buffer is not
    # covered; the few others are replayed.
    rest = r[~found]
    writes_at = np.sort(at[w])
    earlier = np.searchsorted(writes_at, place[rest] * span, side="left")
    some = np.searchsorted(writes_at, at[rest], side="left") > earlier
    rest = rest[some]
    if len(rest):
        covered[rest], lo[rest], hi[rest] = _replayed(
            ends, memory, rows, place, at, write, invalid, rest
        )
    return covered, lo, hi


def _last_equal_before(place, keys, at, query_place, query_keys, query_at):
    """For each query, the position (in the first arrays) of the last row
    of its place and key that comes before it; -1 where none."""
    found = np.full(len(query_at), -1, np.int64)
    if not len(at):
        return found
    pairs = np.column_stack(
        [np.concatenate([place, query_place]), np.concatenate([keys, query_keys])]
    )
    _, kind = group_rows(pairs)
    span = int(max(at.max(), query_at.max())) + 2
    mine = kind[: len(at)] * span + at
    order = np.argsort(mine, kind="stable")
    last = np.searchsorted(mine[order], kind[len(at) :] * span + query_at) - 1
    ok = last >= 0
    ok[ok] = kind[: len(at)][order[last[ok]]] == kind[len(at) :][ok]
    found[ok] = order[last[ok]]
    return found


def _replayed(ends, memory, rows, place, at, write, invalid, reads):
    """Whether each of these reads is covered, and the box bounding what is
    not, by replaying its iteration's writes and invalidations of its
    buffer in program order (the rare reads that no single earlier write
    covers exactly)."""
    involved = np.flatnonzero(
        np.isin(place, np.unique(place[reads])) & (write | invalid)
    )
    everything = np.concatenate([reads, involved])
    runs = ends.runs(memory, rows[everything])
    role = np.where(runs.owner < len(reads), 0, 1)  # reads first at one event
    owner = everything[runs.owner]
    order = np.lexsort((runs.lo, role, at[owner]))
    sets: dict[int, coverage.IntervalSet] = {}
    gaps: dict[int, list[tuple[int, int]]] = {}
    for k in order.tolist():
        local = int(owner[k])
        lo, hi = int(runs.lo[k]), int(runs.hi[k])
        written = sets.setdefault(int(place[local]), coverage.IntervalSet())
        if role[k] == 0:
            gaps.setdefault(local, []).extend(written.gaps(lo, hi))
        elif invalid[local]:
            written.remove(lo, hi)
        else:
            written.add(lo, hi)
    covered = np.ones(len(reads), bool)
    lo, hi = ends.lo[rows[reads]].copy(), ends.hi[rows[reads]].copy()
    for n, local in enumerate(reads.tolist()):
        if missing := gaps.get(local):
            covered[n] = False
            row = int(rows[local])
            lo[n], hi[n] = _bounding_box(memory, row, ends, missing)
    return covered, lo, hi


def _bounding_box(memory, row: int, ends, runs) -> tuple[np.ndarray, np.ndarray]:
    """The least box that holds these runs of global elements of the row's
    buffer, within the row's box: a run that stays in one row of its last
    dimensions is exact, a longer one spans those dimensions whole."""
    buffer = int(ends.buffer[row])
    shape = tuple(int(n) for n in memory.shapes[buffer])
    base = int(memory.bases[buffer])
    lo = np.array(shape, np.int64)
    hi = np.zeros(len(shape), np.int64)
    for a, b in runs:
        first = np.unravel_index(a - base, shape)
        last = np.unravel_index(b - 1 - base, shape)
        differs = [d for d in range(len(shape)) if first[d] != last[d]]
        split = differs[0] if differs else len(shape)
        for d in range(len(shape)):
            start, stop = int(first[d]), int(last[d]) + 1
            if d > split:
                start, stop = 0, shape[d]
            lo[d], hi[d] = min(lo[d], start), max(hi[d], stop)
    box_lo, box_hi = ends.lo[row].copy(), ends.hi[row].copy()
    rank = min(len(shape), len(box_lo))  # past the buffer's rank: padding
    box_lo[:rank] = np.maximum(box_lo[:rank], lo[:rank])
    box_hi[:rank] = np.minimum(box_hi[:rank], hi[:rank])
    return box_lo, box_hi


def _loop_name(stream: Stream, loop: int) -> str:
    return stream.loops[loop - 1].name if loop else "?"
