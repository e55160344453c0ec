"""Which accesses meet in time and in memory: the index behind race checks.

Each access is a box of one buffer (an interval per dimension) with a
window in program time: a DMA end from its start to the wait that finishes
it, a compute access for its one instant. Two accesses conflict when they
share a buffer, their boxes and windows overlap, and at least one writes.

Comparing every pair is quadratic, and both obvious orders fail somewhere:
sorted by start time, a loop's DMAs meet only their neighbours, but a
thousand DMAs in flight at once all meet each other; sorted by position,
those thousand column DMAs are disjoint, but a loop's 200,000 copies into
one buffer slot all meet. So, per buffer, the index counts the candidate
pairs each order would produce (one sort and two binary searches per
access, no pair made) and uses the order with the fewest: by start time,
or by position along whichever buffer dimension separates the accesses
best. Candidates are produced in chunks, earliest anchors first, and the
search stops as soon as no later anchor can beat the earliest conflict
found. Reads are never paired with reads, and in a bipartite search (the
parallel-loop check, where writes may reuse a scratch buffer) writes are
paired with reads only.

Everything is numpy over all accesses at once, so the cost is a few passes
over the accesses plus the candidate pairs, and `Stats` counts both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

PAIRS_PER_BATCH = 1 << 18
"""Candidate pairs produced and filtered at once (bounds memory)."""


@dataclass(frozen=True)
class AccessWindows:
    """One row per access: its buffer, box, window and kind."""

    buffer: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    write: np.ndarray
    start: np.ndarray
    """The event at which the access begins (a DMA's start)."""
    finish: np.ndarray
    """The event by which it is over (the wait that finishes a DMA)."""
    event: np.ndarray
    """AccessWindows of one event (a DMA's two ends) never conflict here."""


@dataclass
class Stats:
    """The work of one search, for growth tests: counted, not timed."""

    accesses: int = 0
    candidates: int = 0
    orders: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Conflict:
    later: int
    earlier: int


def first_conflict(
    accesses: AccessWindows, stats: Stats | None = None, bipartite: bool = False
) -> Conflict | None:
    """The conflict detected first: the one whose later access begins
    earliest, then whose earlier access began earliest, then writes against
    writes before writes against reads before reads against writes. In a
    bipartite search two writes never conflict."""
    stats = stats if stats is not None else Stats()
    count = len(accesses.buffer)
    stats.accesses += count
    if count < 2:
        return None
    buffers = int(accesses.buffer.max()) + 1
    orders = [_by_time(accesses, bipartite)]
    sizes = np.bincount(accesses.buffer, minlength=buffers)
    if (np.bincount(accesses.buffer, orders[0].counts, buffers) > 4 * sizes).any():
        # Some buffer has many accesses in flight at once: try positions.
        orders += [
            _by_position(accesses, d, bipartite) for d in range(accesses.lo.shape[1])
        ]
    totals = np.stack([np.bincount(accesses.buffer, o.counts, buffers) for o in orders])
    chosen = np.argmin(totals, axis=0)[accesses.buffer]
    for number, order in enumerate(orders):
        stats.orders[order.name] = stats.orders.get(order.name, 0) + int(
            (chosen == number).sum()
        )
    counts = np.choose(chosen, [o.counts for o in orders])
    anchors = np.argsort(accesses.start, kind="stable")
    total = np.cumsum(counts[anchors])
    best: tuple | None = None
    at = 0
    while at < count:
        if best is not None and accesses.start[anchors[at]] > best[0]:
            break  # every later anchor's conflicts are detected later
        done = total[at - 1] if at else 0.0
        stop = max(
            at + 1, int(np.searchsorted(total, done + PAIRS_PER_BATCH, side="right"))
        )
        chunk = anchors[at:stop]
        at = stop
        for number, order in enumerate(orders):
            mine = chunk[chosen[chunk] == number]
            if not len(mine):
                continue
            a, b = order.pairs(mine)
            stats.candidates += len(a)
            found = _best(accesses, a, b, bipartite)
            if found is not None and (best is None or found < best):
                best = found
    return None if best is None else Conflict(best[3], best[4])


def _best(
    accesses: AccessWindows, a: np.ndarray, b: np.ndarray, bipartite: bool = False
) -> tuple | None:
    """Among candidate pairs, the earliest real conflict, as a sort key
    ending in (later, earlier); in a bipartite search, a read of an earlier
    write before a write of an earlier read."""
    s, f = accesses.start, accesses.finish
    meet = (accesses.event[a] != accesses.event[b]) & (s[a] < f[b]) & (s[b] < f[a])
    meet &= accesses.write[a] | accesses.write[b]
    a, b = a[meet], b[meet]
    lo, hi = accesses.lo, accesses.hi
    for d in range(lo.shape[1]):  # the pairs that remain, a dimension at a time
        meet = (lo[a, d] < hi[b, d]) & (lo[b, d] < hi[a, d])
        a, b = a[meet], b[meet]
    if not len(a):
        return None
    later = np.where(s[a] > s[b], a, b)
    earlier = np.where(s[a] > s[b], b, a)
    w = accesses.write
    if bipartite:
        rank = np.where(w[later], 1, 0)
    else:
        rank = np.where(w[later], np.where(w[earlier], 0, 1), 2)
    keys = np.lexsort((earlier, later, rank, s[earlier], s[later]))
    k = keys[0]
    return (
        int(s[later[k]]),
        int(s[earlier[k]]),
        int(rank[k]),
        int(later[k]),
        int(earlier[k]),
    )


@dataclass(frozen=True)
class _Order:
    """One way to sort the accesses, and each anchor's range of partners in
    it: `partners[lo[i]:hi[i]]`, where a write anchor's partners are all
    accesses (only the reads in a bipartite search) and a read anchor's
    are the writes."""

    name: str
    for_writes: np.ndarray
    writers: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    write: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        return np.maximum(self.hi - self.lo, 0).astype(np.float64)

    def pairs(self, anchors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a_parts, b_parts = [], []
        for is_write, partners in ((True, self.for_writes), (False, self.writers)):
            mine = anchors[self.write[anchors] == is_write]
            lo, hi = self.lo[mine], np.maximum(self.hi[mine], self.lo[mine])
            sizes = hi - lo
            total = int(sizes.sum())
            if not total:
                continue
            first = np.repeat(lo - np.cumsum(sizes) + sizes, sizes)
            a_parts.append(np.repeat(mine, sizes))
            b_parts.append(partners[first + np.arange(total)])
        if not a_parts:
            empty = np.zeros(0, np.int64)
            return empty, empty
        return np.concatenate(a_parts), np.concatenate(b_parts)


@dataclass(frozen=True)
class _Sorted:
    """The accesses sorted by a key: all of them, the writes, the reads."""

    everyone: np.ndarray
    all_keys: np.ndarray
    writers: np.ndarray
    write_keys: np.ndarray
    readers: np.ndarray
    read_keys: np.ndarray

    def for_writes(self, bipartite: bool) -> tuple[np.ndarray, np.ndarray]:
        """A write anchor's candidate partners and their keys."""
        if bipartite:
            return self.readers, self.read_keys
        return self.everyone, self.all_keys


def _sorted(keys: np.ndarray, write: np.ndarray) -> _Sorted:
    everyone = np.argsort(keys, kind="stable")
    writers = everyone[write[everyone]]
    readers = everyone[~write[everyone]]
    return _Sorted(
        everyone, keys[everyone], writers, keys[writers], readers, keys[readers]
    )


def _searched(
    write_partner_keys, write_keys, key, write, order, side: Literal["left", "right"]
) -> np.ndarray:
    """Each access's position of `key` among a write anchor's partners
    (for a write) or among the writes (for a read): one search per access,
    not two, and asked in sorted order when `order` sorts `key` (far fewer
    cache misses on long tables)."""
    order = np.arange(len(key)) if order is None else order
    query, mine = key[order], write[order]
    found = np.empty(len(key), np.int64)
    found[order[mine]] = np.searchsorted(write_partner_keys, query[mine], side=side)
    found[order[~mine]] = np.searchsorted(write_keys, query[~mine], side=side)
    return found


def _by_time(accesses: AccessWindows, bipartite: bool = False) -> _Order:
    """Partners that begin while the anchor's window is open."""
    span = int(max(accesses.finish.max(), accesses.start.max())) + 2
    key = accesses.buffer * span + accesses.start
    until = accesses.buffer * span + accesses.finish
    table = _sorted(key, accesses.write)
    partners, partner_keys = table.for_writes(bipartite)
    write = accesses.write
    lo = _searched(partner_keys, table.write_keys, key, write, table.everyone, "right")
    hi = _searched(partner_keys, table.write_keys, until, write, None, "left")
    return _Order("time", partners, table.writers, lo, hi, write)


def _by_position(accesses: AccessWindows, dim: int, bipartite: bool = False) -> _Order:
    """Partners whose box begins inside the anchor's along one dimension
    (ties in the beginning broken by the sort, so each pair appears once;
    in a bipartite search a pair of equal beginnings may appear twice)."""
    values = np.unique(np.concatenate([accesses.lo[:, dim], accesses.hi[:, dim]]))
    span = len(values) + 1
    begin = np.searchsorted(values, accesses.lo[:, dim])
    end = np.searchsorted(values, accesses.hi[:, dim])
    key = accesses.buffer * span + begin
    until = accesses.buffer * span + end
    table = _sorted(key, accesses.write)
    write = accesses.write
    write_keys = table.write_keys
    if bipartite:
        partners, read_keys = table.readers, table.read_keys
        first = np.searchsorted(read_keys, key, side="left")
        last = np.searchsorted(read_keys, until, side="left")
    else:
        partners = table.everyone
        position = np.empty(len(key), np.int64)
        position[table.everyone] = np.arange(len(key))
        first = position + 1
        last = np.searchsorted(table.all_keys, until, side="left")
    lo = np.where(write, first, np.searchsorted(write_keys, key, side="left"))
    hi = np.where(write, last, np.searchsorted(write_keys, until, side="left"))
    return _Order(f"dimension {dim}", partners, table.writers, lo, hi, write)
