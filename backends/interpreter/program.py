"""A stream prepared for the protocol: validated, its loops expanded into
events, and its accesses as the protocol's rows (`protocol.BoxAccesses`).

`prepare` does this once per compile; `check_stream` is the data-free
protocol check (`verify --protocol`) on top of it.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from dataclasses import dataclass

import numpy as np

from copyir.expand import Trace
from copyir.stream import COMPUTE, INVALIDATE, OPAQUE, RELEASE, RELEASE_SEM, Stream
from copyir.validate import ResolvedEnds, Validated, validate_stream

from .. import parallel, protocol
from .inputs import check_names
from .naming import Namer


@dataclass(frozen=True)
class Program:
    """A validated, expanded stream as the protocol's tables."""

    validated: Validated
    events: protocol.Events
    ends: protocol.BoxAccesses
    memory: protocol.Memory
    namer: Namer
    releases: protocol.Releases

    @property
    def trace(self) -> Trace:
        return self.validated.trace

    @functools.cached_property
    def protocol(self) -> protocol.DmaProtocol:
        """The protocol's answers for this program (in flight, finished,
        conflicts), each computed once."""
        return protocol.DmaProtocol(
            self.events, self.ends, self.memory, self.namer, self.releases
        )

    def check(self, claims: bool = True) -> protocol.Verdict:
        """Decide the protocol; with `claims`, the parallel loops' claims
        too (on a program in its own order: see `Executable`)."""
        stream, trace = self.namer.stream, self.trace
        levels = parallel.levels(stream, trace.row, trace.indices) if claims else []

        def broken(starts: np.ndarray, finish: np.ndarray):
            return parallel.first_violation(
                stream,
                levels,
                self.events,
                self.ends,
                self.memory,
                starts,
                finish,
                self.namer,
            )

        return self.protocol.decide(broken if levels else None)

    def warn_stale(self, verdict: protocol.Verdict) -> None:
        """The one warning for a DMA that copies stale window memory (a
        pipeline body that wrote its output window in part), if any."""
        if verdict.stale is not None:
            warning = self.protocol.stale_warning(verdict.stale)
            warnings.warn(warning, stacklevel=3)


def prepare(
    stream: Stream,
    provided: frozenset[str],
    order: dict[int, np.ndarray] | None = None,
) -> Program:
    """Validate a stream, expand its loops and build the protocol's tables."""
    validated = validate_stream(stream, order)
    check_names(stream, provided)
    trace = validated.trace
    table = stream.instructions
    op = table["op"][trace.row].astype(np.int64)
    events = protocol.Events(op, trace.sem, table["bytes"][trace.row].astype(np.int64))
    add = table["add"][trace.row[validated.src.events]].astype(bool)
    own = trace.row[validated.dst.events]
    writes = table["writes"][own].astype(bool)
    stale, keeps = table["stale"][own], table["keeps"][own]
    ends = _protocol_ends(validated, op, add, writes, stale, keeps)
    layout = validated.layout
    memory = protocol.Memory(
        layout.shapes,
        layout.strides,
        np.array([b.param and b.name in provided for b in stream.buffers], bool),
        np.array([b.param for b in stream.buffers], bool),
    )
    releases = _releases(validated, op, len(stream.buffers))
    validated = _without_boxes(validated)
    namer = Namer(stream, validated.trace)
    return Program(validated, events, ends, memory, namer, releases)


def check_stream(
    stream: Stream, provided: frozenset[str] | set[str] | None = None
) -> protocol.Verdict:
    """The data-free protocol check: validate the stream and decide the
    protocol, without arrays. Parameters count as inputs unless `provided`
    names the ones that are (so a read of a parameter is never reported
    as unwritten); scratch starts unwritten."""
    if provided is None:
        provided = frozenset(b.name for b in stream.buffers if b.param)
    program = prepare(stream, frozenset(provided))
    verdict = program.check()
    program.warn_stale(verdict)
    return verdict


def _protocol_ends(
    validated: Validated,
    op: np.ndarray,
    add: np.ndarray,
    writes: np.ndarray,
    stale: np.ndarray,
    keeps: np.ndarray,
):
    """The protocol's rows, filled in place (no part tables): two per DMA,
    its source then its destination (read too when the DMA adds); then
    each computation's operands (read), the boxes opaque computations read,
    the computations' destinations and the boxes opaque computations write
    (written), and the invalidations' boxes (made unwritten), all instant.
    `writes` says, per destination, whether an opaque one is written,
    `stale` whether an invalidation's is stale and `keeps` whether an
    opaque write keeps the bytes."""
    src, dst = validated.src, validated.dst
    count = len(src.events)
    pieces: list[tuple[ResolvedEnds, slice | np.ndarray, bool, bool]] = [
        (operand, slice(None), False, False) for operand in validated.operands
    ]
    opaque = op[dst.events] == OPAQUE
    pieces.append((dst, np.flatnonzero(opaque & ~writes), False, False))
    for kind, invalidate in ((COMPUTE, False), (INVALIDATE, True)):
        pieces.append((dst, np.flatnonzero(op[dst.events] == kind), True, invalidate))
    pieces.append((dst, np.flatnonzero(opaque & writes), True, False))
    sizes = [len(access.events[at]) for access, at, _, _ in pieces]
    total = 2 * count + sum(sizes)
    rank = src.lo.shape[1]
    ends = protocol.BoxAccesses(
        event=np.empty(total, np.int64),
        buffer=np.empty(total, np.int64),
        lo=np.empty((total, rank), np.int64),
        hi=np.empty((total, rank), np.int64),
        write=np.zeros(total, bool),
        read=np.zeros(total, bool),
        instant=np.zeros(total, bool),
        invalidate=np.zeros(total, bool),
        shape_kind=np.empty(total, np.int64),
        stale=np.zeros(total, bool),
        keeps=np.zeros(total, bool),
    )
    buffers = len(validated.layout.buffers)

    def put(rows, access: ResolvedEnds, at, own_destination: bool = False) -> None:
        ends.event[rows] = access.events[at]
        ends.buffer[rows] = access.buffer[at]
        ends.lo[rows] = access.lo[at]
        ends.hi[rows] = access.hi[at]
        # An instruction's kind of end, told apart from the other end of
        # its row (the same code, other strides), and its buffer.
        kind = access.kind[at] * 2 + own_destination
        assert ends.shape_kind is not None  # made above
        ends.shape_kind[rows] = kind * buffers + access.buffer[at]

    put(slice(0, 2 * count, 2), src, slice(None))
    put(slice(1, 2 * count, 2), dst, np.searchsorted(dst.events, src.events), True)
    ends.read[0 : 2 * count : 2] = True
    ends.write[1 : 2 * count : 2] = True
    ends.read[1 : 2 * count : 2] = add
    first = 2 * count
    for (access, at, write, invalidate), size in zip(pieces, sizes, strict=True):
        rows = slice(first, first + size)
        put(rows, access, at, access is dst)
        ends.write[rows], ends.read[rows] = write, not write
        ends.instant[rows], ends.invalidate[rows] = True, invalidate
        if invalidate:
            assert ends.stale is not None  # made above
            ends.stale[rows] = stale[at]
        elif write and access is dst:  # computations' and opaque writes
            assert ends.keeps is not None  # made above
            ends.keeps[rows] = keeps[at]
        first += size
    return ends


def _releases(validated: Validated, op: np.ndarray, buffers: int):
    """The ends of scopes, in program order: each released box of a
    buffer, and each released semaphore as resource `buffers + sem`."""
    dst, sem = validated.dst, validated.trace.sem
    boxes = np.flatnonzero(op[dst.events] == RELEASE)
    sems = np.flatnonzero(op == RELEASE_SEM)
    rank = dst.lo.shape[1]
    event = np.concatenate([dst.events[boxes], sems])
    order = np.argsort(event, kind="stable")
    return protocol.Releases(
        event[order],
        np.concatenate([dst.buffer[boxes], buffers + sem[sems]])[order],
        np.concatenate([dst.lo[boxes], np.zeros((len(sems), rank), np.int64)])[order],
        np.concatenate([dst.hi[boxes], np.ones((len(sems), rank), np.int64)])[order],
    )


def _without_boxes(validated: Validated) -> Validated:
    """What the interpreter keeps of a validated stream once the protocol
    has its rows: not the boxes of the ends, nor the trace's addresses
    (the largest tables, needed no more)."""
    empty = np.zeros((0, validated.src.lo.shape[1]), np.int64)

    def slim(access: ResolvedEnds) -> ResolvedEnds:
        return dataclasses.replace(access, lo=empty, hi=empty)

    none = np.zeros(0, np.int64)
    trace = dataclasses.replace(
        validated.trace,
        src_address=none,
        dst_address=none,
        operands=np.zeros((0, validated.trace.operands.shape[1]), np.int64),
    )
    return dataclasses.replace(
        validated,
        trace=trace,
        src=slim(validated.src),
        dst=slim(validated.dst),
        operands=[slim(o) for o in validated.operands],
    )
