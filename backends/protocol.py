"""The DMA protocol, decided once over a whole program (docs/protocol.md).

Semaphores count bytes. A DMA d on semaphore s is finished at the first
wait w on s after d at which the bytes consumed by all waits on s so far,
w included, reach the bytes of all DMAs started on s before w. Until then
d is in flight, and nothing else may read or write its destination or
write its source. Any access that breaks this is a race, whatever order
the DMAs happen to complete in.

The program is a table of events in program order (DMA starts and waits,
computations and invalidations; the accesses each makes are rows of
`BoxAccesses`), and every
question is answered for all events at once with numpy, never by walking
the events one by one in Python:

- each wait's bytes needed against the bytes that can still arrive (a wait
  no DMA can satisfy is an error, never a hang), and from the same running
  sums the wait that finishes each DMA;
- a DMA whose source and destination overlap;
- races: accesses whose windows and boxes overlap (`overlaps`);
- reads of memory nobody wrote: a read must be covered by writes that
  began before it (with no race, those have finished), or by an input;
- at the end of a scope, DMAs still in flight on its buffers or
  semaphores (`Releases`); at the end of the program, any still in flight.

`DmaProtocol` answers these questions for one program (what is in flight
at an event, what has finished, what conflicts) and decides the verdict:
the first problem in program order is raised, so the verdict is the one a
step-by-step walk would give. `Namer` turns events, boxes and semaphores
into the words of messages; the interpreter, the data-free check, the
completion models and (later) a timing model all ask the same object.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

import numpy as np

from copyir import errors
from copyir.errors import CopyIRError, CopyIRWarning, Note
from copyir.stream import START, WAIT
from copyir.tables import group_rows, small_groups

from . import coverage, overlaps

MAX_NOTES = 20
"""A leftovers error lists at most this many DMAs and semaphores."""


@dataclass(frozen=True)
class Events:
    """The program's events in order: what each does to a semaphore."""

    kind: np.ndarray
    sem: np.ndarray
    amount: np.ndarray
    """Bytes a start moves, or bytes a wait needs."""

    @property
    def count(self) -> int:
        return len(self.kind)


@dataclass(frozen=True)
class BoxAccesses:
    """The accesses to memory, one row each: a DMA's source (read) and
    destination (written; read too when the DMA adds), in consecutive
    rows; a computation's operands (read) and destination (written); an
    invalidation's box (which it makes unwritten)."""

    event: np.ndarray
    buffer: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    write: np.ndarray
    read: np.ndarray
    instant: np.ndarray
    """Accesses of a computation or an invalidation: over at their event,
    rather than in flight until a wait."""
    invalidate: np.ndarray
    shape_kind: np.ndarray | None = None
    """Optional small integers: rows with equal values have boxes of one
    buffer and of equal extents (the ends of one instruction, say), so
    what depends only on those is found once per value, without hashing
    the boxes."""
    stale: np.ndarray | None = None
    """Optional, per row: an invalidation that keeps the box's bytes (a
    pipeline's output window at a block's first visit). A DMA that reads
    memory whose last event was one copies those bytes on (Pallas writes
    a whole window back): not an error but a warning (`Verdict.stale`)."""
    keeps: np.ndarray | None = None
    """Optional, per row: an opaque write that keeps the box's bytes (the
    padding of a block cut in a BufferedRef's slot). It counts as written,
    but not in `Verdict.written`: a run's memory there starts as poison."""

    def runs(self, memory: Memory, rows: np.ndarray) -> coverage.Runs:
        """The element runs of these rows' boxes (`coverage.box_runs`)."""
        kinds = None if self.shape_kind is None else self.shape_kind[rows]
        return coverage.box_runs(
            memory.shapes,
            memory.strides,
            memory.bases,
            self.buffer[rows],
            self.lo[rows],
            self.hi[rows],
            kinds,
        )


@dataclass(frozen=True)
class Releases:
    """The ends of scopes: at each event, a box of a buffer, or a
    semaphore, that no DMA may still use (`dma.release`,
    `dma.release_sem`). A semaphore is the one-element box of resource
    `buffers + sem`, so that one search finds both."""

    event: np.ndarray
    resource: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @staticmethod
    def none(rank: int) -> Releases:
        empty = np.zeros(0, np.int64)
        return Releases(
            empty, empty, np.zeros((0, rank), np.int64), np.zeros((0, rank), np.int64)
        )


@dataclass(frozen=True)
class Memory:
    """The buffers as the protocol sees them."""

    shapes: np.ndarray
    strides: np.ndarray
    provided: np.ndarray
    """Per buffer: written whole before the program starts (an input)."""
    params: np.ndarray

    @property
    def bases(self) -> np.ndarray:
        return coverage.bases(self.shapes)


class Namer(Protocol):
    """How a caller names what the protocol reports."""

    def fail(
        self, event: int, message: str, notes: tuple[Note, ...] = ()
    ) -> CopyIRError: ...
    def warning(self, event: int, message: str) -> CopyIRWarning: ...
    def site(self, event: int) -> Note: ...
    def iteration(self, event: int) -> str: ...
    def where(self, event: int) -> str: ...
    def region(self, buffer: int, lo: np.ndarray, hi: np.ndarray) -> str: ...
    def element(self, buffer: int, index: tuple[int, ...]) -> str: ...
    def buffer_name(self, buffer: int) -> str: ...
    def semaphore(self, sem: int) -> str: ...


@dataclass
class Verdict:
    """What the protocol decided about a correct program."""

    starts: np.ndarray
    """The event of each DMA, in program order."""
    finish: np.ndarray
    """The event of the wait that finishes each DMA."""
    written: tuple[np.ndarray, np.ndarray]
    """Every element any DMA writes, as global intervals (`coverage`)."""
    stats: overlaps.Stats = field(default_factory=overlaps.Stats)
    stale: tuple[int, int] | None = None
    """The first DMA that copies stale memory (`BoxAccesses.stale`): its
    source row and first stale element (a global number)."""


class DmaProtocol:
    """The DMA protocol of one program, as answers: which DMAs are in
    flight at an event, which have finished, which accesses conflict, and
    the verdict that puts the first problem in program order.

    The interpreter, `verify --protocol` (through `check_stream`), the
    completion models and a timing model all ask this one object. Each
    answer is computed once, for all events at once, with numpy: the
    semaphores' running sums give every DMA's finishing wait in one sort,
    and conflicts come from the `overlaps` index, never from walking the
    events one by one."""

    def __init__(
        self,
        events: Events,
        ends: BoxAccesses,
        memory: Memory,
        namer: Namer,
        releases: Releases | None = None,
    ):
        self.events = events
        self.ends = ends
        self.memory = memory
        self.namer = namer
        self.releases = (
            releases if releases is not None else Releases.none(ends.lo.shape[1])
        )

    # -- in flight and finished

    @functools.cached_property
    def starts(self) -> np.ndarray:
        """The event of each DMA (DMAs are numbered in program order)."""
        return np.flatnonzero(self.events.kind == START)

    @functools.cached_property
    def _semaphores(self) -> _Semaphores:
        return _semaphores(self.events, self.starts)

    @property
    def finish(self) -> np.ndarray:
        """The event of the wait that finishes each DMA, by the rule; the
        event count for a DMA no wait finishes."""
        return self._semaphores.finish

    def in_flight(self, event: int) -> np.ndarray:
        """The DMAs in flight at an event: started at or before it, not yet
        finished (a DMA's finishing wait is the first event it is not in
        flight at)."""
        started = int(np.searchsorted(self.starts, event, side="right"))
        return np.flatnonzero(self.finish[:started] > event)

    def finished(self, event: int) -> np.ndarray:
        """The DMAs finished at or before an event."""
        return np.flatnonzero(self.finish <= event)

    def finished_by(self, wait: int) -> np.ndarray:
        """The DMAs this wait finishes, in program order."""
        order, finish = self._by_finish
        lo, hi = np.searchsorted(finish, [wait, wait + 1])
        return order[lo:hi]

    @functools.cached_property
    def _by_finish(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.finish, kind="stable")
        return order, self.finish[order]

    def leftovers(self) -> np.ndarray:
        """The DMAs no wait finishes: still in flight at the end."""
        return np.flatnonzero(self.finish >= self.events.count)

    def released_in_flight(
        self, stats: overlaps.Stats | None = None
    ) -> tuple[int, int] | None:
        """The first end of a scope (a row of `releases`) at which a DMA is
        still in flight on what it releases, and that DMA: the end of the
        program's rule (`leftovers`) at the end of a scope, restricted to
        the scope's buffers and semaphores. One bipartite search of the
        `overlaps` index: the DMAs' ends and semaphores as reads over
        their windows, each release as a write at its event."""
        releases = self.releases
        if not len(releases.event) or not len(self.starts):
            return None
        ends, starts = self.ends, self.starts
        dma_rows = np.flatnonzero(~ends.instant)
        dma = np.searchsorted(starts, ends.event[dma_rows])
        buffers, rank = len(self.memory.shapes), ends.lo.shape[1]
        sems = buffers + self.events.sem[starts]
        ones = np.ones((len(starts), rank), np.int64)
        resource = np.concatenate([ends.buffer[dma_rows], sems, releases.resource])
        begin = np.concatenate([ends.event[dma_rows], starts, releases.event])
        over = np.concatenate([self.finish[dma], self.finish, releases.event + 1])
        users = len(dma_rows) + len(starts)
        conflict = overlaps.first_conflict(
            overlaps.AccessWindows(
                resource,
                np.concatenate([ends.lo[dma_rows], ones - 1, releases.lo]),
                np.concatenate([ends.hi[dma_rows], ones, releases.hi]),
                np.arange(len(resource)) >= users,
                begin,
                over,
                begin,
            ),
            stats,
            bipartite=True,
        )
        if conflict is None:
            return None
        which = np.concatenate([dma, np.arange(len(starts))])
        return conflict.later - users, int(which[conflict.earlier])

    # -- conflicts

    def windows(self) -> overlaps.AccessWindows:
        """Each access's box and window in events: a DMA end from its start
        to the wait that finishes its DMA, a computation's or an
        invalidation's for its own event."""
        ends, finish = self.ends, self.finish
        starts = self.starts
        dma = np.minimum(np.searchsorted(starts, ends.event), max(len(starts) - 1, 0))
        window_end = np.where(
            ends.instant, ends.event + 1, finish[dma] if len(starts) else 0
        )
        return overlaps.AccessWindows(
            ends.buffer,
            ends.lo,
            ends.hi,
            ends.write,
            ends.event,
            window_end,
            ends.event,
        )

    def race(self, stats: overlaps.Stats | None = None) -> overlaps.Conflict | None:
        """The first two accesses (rows of `ends`) that meet in time and
        memory, one of them a write: the race detected first."""
        return overlaps.first_conflict(self.windows(), stats)

    def self_overlap(self) -> tuple[int, int] | None:
        """The rows of the first DMA whose source and destination share an
        element."""
        return _self_overlap(self.ends)

    @functools.cached_property
    def _unwritten_reads(self) -> tuple[Unwritten | None, Unwritten | None]:
        return _first_unwritten(self.ends, self.memory)

    def unwritten(self) -> tuple[int, int] | None:
        """The first read of memory nobody wrote: its row and first
        unwritten element (a global number)."""
        found = self._unwritten_reads[0]
        return None if found is None else (found[1], found[2])

    def stale_read(self) -> tuple[int, int] | None:
        """The first DMA that reads memory whose last event was a stale
        invalidation (and nothing nobody wrote): its source row and first
        stale element (a global number)."""
        found = self._unwritten_reads[1]
        return None if found is None else (found[1], found[2])

    def stale_warning(self, found: tuple[int, int]) -> CopyIRWarning:
        """The warning for a DMA that copies stale memory (`stale_read`):
        at the DMA, naming its destination and the first element there
        that holds what the window's slot held before."""
        return _stale_warning(self.ends, self.memory, found, self.namer)

    # -- the verdict

    def decide(
        self, claims: Callable[[np.ndarray, np.ndarray], Any] | None = None
    ) -> Verdict:
        """Decide the protocol for the whole program; raise its first problem.

        `claims(starts, finish)`, when given, finds the first broken claim
        of a parallel loop (`parallel.first_violation`), which competes
        with the protocol's own problems for the first place in program
        order."""
        events, ends, memory, namer = self.events, self.ends, self.memory, self.namer
        starts, sems = self.starts, self._semaphores
        finish = sems.finish
        problems: list[tuple[int, int, Callable[[], CopyIRError]]] = []
        if sems.unsatisfiable is not None:
            problems.append(
                (sems.unsatisfiable, 0, lambda: _unsatisfiable(sems, namer))
            )
        overlap = self.self_overlap()
        if overlap is not None:
            problems.append(
                (int(ends.event[overlap[0]]), 1, lambda: _overlap(ends, overlap, namer))
            )
        stats = overlaps.Stats()
        conflict = self.race(stats)
        if conflict is not None:
            at = int(ends.event[conflict.later])
            problems.append((at, 2, lambda: _race(ends, conflict, namer)))
        if claims is not None and (broken := claims(starts, finish)) is not None:
            problems.append((broken.event, 3, broken.build))
        unwritten = self.unwritten()
        if unwritten is not None:
            at = int(ends.event[unwritten[0]])
            problems.append(
                (at, 4, lambda: _uninitialized(ends, memory, unwritten, namer))
            )
        released = self.released_in_flight()
        if released is not None:
            at = int(self.releases.event[released[0]])
            problems.append(
                (at, 5, lambda: _scope_leftover(self, released[0], released[1]))
            )
        leftover = self.leftovers()
        if leftover.size:
            problems.append(
                (
                    events.count,
                    5,
                    lambda: _leftovers(events, starts, leftover, sems, namer),
                )
            )
        if problems:
            raise min(problems, key=lambda p: p[:2])[2]()
        runs = _write_runs(ends, memory)
        written = coverage.union(runs.lo, runs.hi)
        return Verdict(starts, finish, written, stats, self.stale_read())


# -- semaphores ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Semaphores:
    finish: np.ndarray
    unsatisfiable: int | None
    need: int = 0
    available: int = 0
    events: Events | None = None


def _semaphores(events: Events, starts: np.ndarray) -> _Semaphores:
    """Running byte counts per semaphore, in one sort: each wait's need
    against what can still arrive, and the wait that finishes each DMA."""
    count = events.count
    used = np.flatnonzero((events.kind == START) | (events.kind == WAIT))
    if not used.size:
        return _Semaphores(np.full(len(starts), count, np.int64), None, events=events)
    order = used[np.lexsort((used, events.sem[used]))]
    sem, kind = events.sem[order], events.kind[order]
    amount = events.amount[order]
    wide = float(amount.sum(dtype=np.float64)) >= 2.0**62
    if wide:  # sums past 64 bits: exact, in Python integers
        amount = amount.astype(object)
    started = np.where(kind == START, amount, 0)
    needed = np.where(kind == WAIT, amount, 0)
    first = np.concatenate([[True], sem[1:] != sem[:-1]])
    group = np.cumsum(first) - 1
    started_before = np.cumsum(started) - started
    consumed_before = np.cumsum(needed) - needed
    started_before = started_before - started_before[first][group]
    consumed_before = consumed_before - consumed_before[first][group]
    waits = kind == WAIT
    available = started_before - consumed_before
    short = waits & (needed > available)
    unsatisfiable = None
    if short.any():
        at = int(np.flatnonzero(short)[np.argmin(order[short])])
        unsatisfiable = int(order[at])
    full = waits & (consumed_before + needed >= started_before)
    position = np.arange(len(order))
    upcoming = np.where(full, position, len(order))
    upcoming = np.minimum.accumulate(upcoming[::-1])[::-1]
    finish_at = np.full(count + 1, count, np.int64)
    mine = kind == START
    nxt = upcoming[mine]
    same = nxt < len(order)
    same[same] = group[nxt[same]] == group[mine][same]
    finish_at[order[mine]] = np.where(
        same, order[np.minimum(nxt, len(order) - 1)], count
    )
    result = _Semaphores(finish_at[starts], unsatisfiable, events=events)
    if unsatisfiable is not None:
        at = int(np.flatnonzero(order == unsatisfiable)[0])
        result = _Semaphores(
            result.finish, unsatisfiable, int(needed[at]), int(available[at]), events
        )
    return result


def _pending(events: Events, before: int) -> dict[int, int]:
    """Per semaphore, the bytes started and not yet waited for before an
    event: what it holds once every DMA in flight has arrived."""
    head = slice(0, before)
    kind, sem, amount = events.kind[head], events.sem[head], events.amount[head]
    pending: dict[int, int] = {}
    for code, sign in ((START, 1), (WAIT, -1)):
        mine = kind == code
        for s, bytes in zip(sem[mine].tolist(), amount[mine].tolist(), strict=True):
            pending[s] = pending.get(s, 0) + sign * bytes
    return pending


def _unsatisfiable(sems: _Semaphores, namer: Namer) -> CopyIRError:
    events, at = sems.events, sems.unsatisfiable
    assert events is not None and at is not None  # both set for such a wait
    pending = _pending(events, at)
    sem = int(events.sem[at])
    notes = tuple(
        Note(errors.RUN_BYTES_IN_FLIGHT.format(sem=namer.semaphore(s), bytes=left))
        for s, left in sorted(pending.items())
        if left > 0 and s != sem
    )[:MAX_NOTES]
    return namer.fail(
        at,
        errors.RUN_UNSATISFIABLE_WAIT.format(
            sem=namer.semaphore(sem), need=sems.need, available=sems.available
        ),
        notes,
    )


def _leftovers(events, starts, leftover, sems, namer: Namer) -> CopyIRError:
    notes = [
        Note(
            f"DMA of {int(events.amount[starts[d]])} bytes on semaphore "
            f"{namer.semaphore(int(events.sem[starts[d]]))} started here",
            namer.site(int(starts[d])).loc,
        )
        for d in leftover[:MAX_NOTES]
    ]
    if len(leftover) > MAX_NOTES:
        notes.append(Note(f"and {len(leftover) - MAX_NOTES} more DMAs"))
    pending = _pending(events, events.count)
    left = [(s, b) for s, b in sorted(pending.items()) if b]
    for s, b in left[:MAX_NOTES]:
        notes.append(
            Note(errors.RUN_SEMAPHORE_NOT_ZERO.format(sem=namer.semaphore(s), bytes=b))
        )
    return namer.fail(
        int(starts[leftover[0]]),
        errors.RUN_LEFTOVERS.format(count=len(leftover)),
        tuple(notes),
    )


def _scope_leftover(protocol: DmaProtocol, release: int, dma: int) -> CopyIRError:
    """A DMA still in flight where a scope ends: at the DMA's start, with
    a note at the scope (and, for a semaphore, the bytes it still owes)."""
    events, namer, releases = protocol.events, protocol.namer, protocol.releases
    start, at = int(protocol.starts[dma]), int(releases.event[release])
    resource = int(releases.resource[release])
    buffers = len(protocol.memory.shapes)
    notes = [Note(errors.RUN_SCOPE_ENDS, namer.site(at).loc)]
    if resource >= buffers:
        sem = resource - buffers
        name = namer.semaphore(sem)
        owed = _pending(events, at).get(sem, 0)
        notes.append(Note(errors.RUN_SCOPE_SEMAPHORE.format(sem=name, bytes=owed)))
    else:
        name = namer.buffer_name(resource)
    message = errors.RUN_SCOPE_IN_FLIGHT.format(
        bytes=int(events.amount[start]),
        sem=namer.semaphore(int(events.sem[start])),
        name=name,
    )
    return namer.fail(start, message, tuple(notes))


# -- accesses --------------------------------------------------------------------------


def _self_overlap(ends: BoxAccesses) -> tuple[int, int] | None:
    """The first DMA whose source and destination share an element: its
    two ends are consecutive rows of one event."""
    event, instant, buffer = ends.event, ends.instant, ends.buffer
    pair = (event[:-1] == event[1:]) & ~instant[:-1] & ~instant[1:]
    pair &= buffer[:-1] == buffer[1:]
    a = np.flatnonzero(pair)
    for d in range(ends.lo.shape[1]):  # the pairs that remain, a dimension at a time
        b = a + 1
        a = a[(ends.lo[a, d] < ends.hi[b, d]) & (ends.lo[b, d] < ends.hi[a, d])]
    if not len(a):
        return None
    return int(a[0]), int(a[0]) + 1


def _overlap(ends: BoxAccesses, pair, namer: Namer) -> CopyIRError:
    src, dst = pair
    return namer.fail(
        int(ends.event[src]),
        errors.RUN_SELF_OVERLAP.format(
            src=_region(ends, src, namer), dst=_region(ends, dst, namer)
        ),
    )


def _region(ends: BoxAccesses, row: int, namer: Namer) -> str:
    return namer.region(int(ends.buffer[row]), ends.lo[row], ends.hi[row])


def _race(ends: BoxAccesses, conflict: overlaps.Conflict, namer: Namer) -> CopyIRError:
    later, earlier = conflict.later, conflict.earlier
    site = namer.site(int(ends.event[earlier]))
    words = {
        "action": "writes" if ends.write[later] else "reads",
        "region": _region(ends, later, namer),
        "other": namer.where(int(ends.event[earlier])),
        "their": "writes" if ends.write[earlier] else "reads",
    }
    if ends.instant[later]:
        what = "invalidation" if ends.invalidate[later] else "computation"
        message = errors.RUN_ACCESS_RACE.format(what=what, **words)
    else:
        message = errors.RUN_RACE.format(**words)
    return namer.fail(
        int(ends.event[later]),
        message,
        (Note("the DMA in flight started here", site.loc),),
    )


def _first_unwritten(
    ends: BoxAccesses, memory: Memory
) -> tuple[Unwritten | None, Unwritten | None]:
    """The first read, in program order, that no earlier write or input
    covers, and the first DMA that copies stale memory (`BoxAccesses.
    stale`): each as (event, row, first element), or None.

    Only reads of buffers that start unwritten, or that an invalidation
    makes unwritten again, can fail. Each such buffer is settled by its
    boxes when they allow it (`_by_boxes`: window slots, blocks), else by
    replaying its events (`_by_replay`)."""
    invalidated = np.zeros(len(memory.shapes), bool)
    invalidated[ends.buffer[ends.invalidate]] = True
    doubtful = ends.read & (~memory.provided[ends.buffer] | invalidated[ends.buffer])
    if not doubtful.any():
        return None, None
    writing = ends.write & ~ends.invalidate
    # Rows by buffer, each buffer's rows in row order; reads that cannot
    # fail play no part.
    rows = np.flatnonzero(doubtful | ends.write)
    rows = rows[np.argsort(ends.buffer[rows], kind="stable")]
    edges = np.flatnonzero(np.diff(ends.buffer[rows])) + 1
    best: Unwritten | None = None
    stale: Unwritten | None = None
    for mine in np.split(rows, edges):
        reads = mine[doubtful[mine]]
        if not reads.size:
            continue
        buffer = int(ends.buffer[mine[0]])
        writes, invalid = mine[writing[mine]], mine[ends.invalidate[mine]]
        found = _by_boxes(ends, memory, buffer, reads, writes, invalid)
        if found is _MIXED:
            found = _by_replay(ends, memory, buffer, reads, writes, invalid)
        failing, copied = found
        if failing is not None and (best is None or failing < best):
            best = failing
        if copied is not None and (stale is None or copied < stale):
            stale = copied
    return best, stale


def _by_replay(
    ends: BoxAccesses, memory: Memory, buffer: int, reads, writes, invalid
) -> tuple[Unwritten | None, Unwritten | None]:
    """`_replay_buffer`, spared the reads of exactly the box an earlier
    write wrote when nothing in the buffer is invalidated (those stay
    covered)."""
    if not invalid.size:
        read_keys = coverage.box_keys(
            ends.buffer[reads], ends.lo[reads], ends.hi[reads]
        )
        keys = coverage.box_keys(ends.buffer[writes], ends.lo[writes], ends.hi[writes])
        sort = np.lexsort((ends.event[writes], keys))
        order, keys = writes[sort], keys[sort]
        at = np.minimum(np.searchsorted(keys, read_keys), max(len(order) - 1, 0))
        found = np.zeros(len(reads), bool)
        if len(order):
            candidate = order[at]
            found = keys[at] == read_keys
            found &= ends.event[candidate] < ends.event[reads]
            found &= (ends.lo[candidate] == ends.lo[reads]).all(axis=1)
            found &= (ends.hi[candidate] == ends.hi[reads]).all(axis=1)
        reads = reads[~found]
        if not reads.size:
            return None, None
    return _replay_buffer(ends, memory, buffer, reads, writes, invalid)


def _box_keys(ends: BoxAccesses, rows: np.ndarray) -> np.ndarray:
    return coverage.box_keys(ends.buffer[rows], ends.lo[rows], ends.hi[rows])


class _Mixed(Enum):
    MIXED = "mixed"


_MIXED = _Mixed.MIXED
"""`_by_boxes`' answer for a buffer whose boxes partly overlap."""

Unwritten = tuple[int, int, int]
"""(event, row, first unwritten element) of a read of unwritten memory."""


def _stale_rows(ends: BoxAccesses, rows: np.ndarray) -> np.ndarray:
    """Whether each row is a stale invalidation."""
    if ends.stale is None:
        return np.zeros(len(rows), bool)
    return ends.stale[rows] & ends.invalidate[rows]


def _by_boxes(
    ends: BoxAccesses, memory: Memory, buffer: int, reads, writes, invalid
) -> tuple[Unwritten | None, Unwritten | None] | _Mixed:
    """The replay's answer for one buffer, without replaying, when its
    distinct boxes are pairwise identical or disjoint (window slots,
    blocks): then each box lives on its own, and a read of it is covered
    exactly when the last write or invalidation of that box before the
    read's event is a write (or, with none, when the buffer is an input);
    a DMA's read after a stale invalidation copies stale memory. Returns
    the first failing read and the first stale copy, each (event, row,
    first unwritten element) or None; or `_MIXED`.

    The replay visits an event's reads before its writes, and the runs of
    one event in order of position; a wholly unwritten box's first
    unwritten element is its first element, so the first failing read is
    the least (event, first element, row)."""
    rows = np.concatenate([reads, writes, invalid])
    kinds, box = _distinct_boxes(ends, memory, rows)
    runs = ends.runs(memory, kinds)
    lo = np.sort(runs.lo)
    hi = runs.hi[np.argsort(runs.lo, kind="stable")]
    if (hi[:-1] > lo[1:]).any():
        return _MIXED
    # Per box, in program order: reads (0) before writes (1) before
    # invalidations (2) at one event, as the replay orders them.
    role = np.repeat(np.arange(3), [len(reads), len(writes), len(invalid)])
    event = ends.event[rows]
    order = np.lexsort((np.arange(len(rows)), role, event, box))
    role, box = role[order], box[order]
    stale = _stale_rows(ends, rows[order])
    position = np.arange(len(order))
    last = np.maximum.accumulate(np.where(role > 0, position, -1))
    mine = role == 0
    before = last[mine]
    known = before >= 0
    known[known] = box[before[known]] == box[mine][known]
    provided = bool(memory.provided[buffer])
    covered = np.where(known, role[np.maximum(before, 0)] == 1, provided)
    reading = rows[order[mine]]
    copied = known & stale[np.maximum(before, 0)] & ~ends.instant[reading]
    return (
        _least(ends, memory, buffer, reading[~covered & ~copied]),
        _least(ends, memory, buffer, reading[copied]),
    )


def _least(
    ends: BoxAccesses, memory: Memory, buffer: int, rows: np.ndarray
) -> Unwritten | None:
    """Of reads of whole boxes, the least (event, first element, row)."""
    if not rows.size:
        return None
    first = memory.bases[buffer] + (ends.lo[rows] * memory.strides[buffer]).sum(axis=1)
    at = np.lexsort((rows, first, ends.event[rows]))[0]
    return int(ends.event[rows[at]]), int(rows[at]), int(first[at])


def _distinct_boxes(
    ends: BoxAccesses, memory: Memory, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The distinct boxes among rows (of one buffer): a row of each, and
    each row's box number. With shape kinds, a box is its extents (numbered
    once per kind) and its first element, one small integer per row."""
    buffer = int(ends.buffer[rows[0]])
    size = int(np.prod(memory.shapes[buffer]))
    kinds = ends.shape_kind
    if kinds is None or len(np.unique(kinds[rows])) * size >= 2**62:
        boxes = np.concatenate([ends.lo[rows], ends.hi[rows]], axis=1)
        first, kind = group_rows(boxes)
        return rows[first], kind
    _, some, group = small_groups(kinds[rows])
    extents = ends.hi[rows[some]] - ends.lo[rows[some]]
    numbers: dict[tuple, int] = {}
    shape_class = np.array(
        [numbers.setdefault(tuple(e), len(numbers)) for e in extents.tolist()],
        np.int64,
    )
    element = np.zeros(len(rows), np.int64)
    for d, stride in enumerate(memory.strides[buffer].tolist()):
        element += ends.lo[rows, d] * stride
    _, first, kind = small_groups(shape_class[group] * size + element)
    return rows[first], kind


def _replay_buffer(
    ends: BoxAccesses, memory: Memory, buffer: int, mine_r, mine_w, mine_i
) -> tuple[Unwritten | None, Unwritten | None]:
    """Replay one buffer's writes, invalidations and doubtful reads in
    program order over interval sets (an input written whole first): the
    first read not covered, and the first DMA that copies stale memory
    before it, each (event, row, first unwritten element) or None.
    `written` holds what was written; `kept`, that and what a stale
    invalidation left (which a DMA, but no computation, may read)."""
    bases = memory.bases
    rows = np.concatenate([mine_r, mine_w, mine_i])
    runs = ends.runs(memory, rows)
    owner = rows[runs.owner]
    stale = _stale_rows(ends, owner)
    # At one event, reads come first: a DMA that adds, or a computation
    # that updates its destination, reads it before it writes it.
    kind = np.where(runs.owner < len(mine_r), 0, 1)
    order = np.lexsort((runs.lo, kind, ends.event[owner]))
    written, kept = coverage.IntervalSet(), coverage.IntervalSet()
    if memory.provided[buffer]:
        base = int(bases[buffer])
        written.add(base, base + int(np.prod(memory.shapes[buffer])))
        kept.add(base, base + int(np.prod(memory.shapes[buffer])))
    copied: Unwritten | None = None
    for k in order:
        lo, hi, row = int(runs.lo[k]), int(runs.hi[k]), int(owner[k])
        if kind[k] == 0:
            missing = written.first_missing(lo, hi)
            if missing is None:
                continue
            at = (int(ends.event[row]), row, missing)
            if not ends.instant[row]:
                unkept = kept.first_missing(lo, hi)
                if unkept is None:
                    copied = copied or at
                    continue
                at = (at[0], row, unkept)
            return at, copied
        elif ends.invalidate[row]:
            written.remove(lo, hi)
            if stale[k]:
                kept.add(lo, hi)
            else:
                kept.remove(lo, hi)
        else:
            written.add(lo, hi)
            kept.add(lo, hi)
    return None, copied


def _uninitialized(
    ends: BoxAccesses, memory: Memory, found, namer: Namer
) -> CopyIRError:
    row, missing = found
    buffer = int(ends.buffer[row])
    flat = missing - int(memory.bases[buffer])
    index = tuple(int(i) for i in np.unravel_index(flat, tuple(memory.shapes[buffer])))
    notes = ()
    if memory.params[buffer] and not memory.provided[buffer]:
        notes = (Note(errors.RUN_NO_INPUT.format(name=namer.buffer_name(buffer))),)
    template = (
        errors.RUN_COMPUTE_UNINITIALIZED
        if ends.instant[row]
        else errors.RUN_UNINITIALIZED
    )
    return namer.fail(
        int(ends.event[row]),
        template.format(
            region=_region(ends, row, namer), first=namer.element(buffer, index)
        ),
        notes,
    )


def _stale_warning(
    ends: BoxAccesses, memory: Memory, found: tuple[int, int], namer: Namer
) -> CopyIRWarning:
    """At the DMA that copies stale memory: its destination, and the
    element there that receives the first stale one (its place in the
    DMA's box, over the dimensions of more than one element)."""
    row, element = found
    dst = row | 1  # a DMA's rows: its source, then its destination
    buffer = int(ends.buffer[row])
    flat = element - int(memory.bases[buffer])
    index = np.array(np.unravel_index(flat, tuple(memory.shapes[buffer])))
    offset = index - ends.lo[row]
    src_dims = np.flatnonzero(ends.hi[row] - ends.lo[row] > 1)
    dst_dims = np.flatnonzero(ends.hi[dst] - ends.lo[dst] > 1)
    target = ends.lo[dst].copy()
    if len(src_dims) == len(dst_dims):
        target[dst_dims] += offset[src_dims]
    out = int(ends.buffer[dst])
    message = errors.RUN_UNWRITTEN_WINDOW.format(
        region=namer.region(out, ends.lo[dst], ends.hi[dst]),
        first=namer.element(out, tuple(int(i) for i in target)),
    )
    return namer.warning(int(ends.event[row]), message)


def _write_runs(ends: BoxAccesses, memory: Memory) -> coverage.Runs:
    """The element runs some write fills with data of its own."""
    writes = ends.write & ~ends.invalidate
    if ends.keeps is not None:
        writes &= ~ends.keeps
    writes = np.flatnonzero(writes)
    return ends.runs(memory, writes)
