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

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from copyir import dma_schema as schema
from copyir import errors
from copyir.errors import CopyIRError, Loc
from copyir.expand import Trace, expand
from copyir.machine import SPACES
from copyir.stream import COMPUTE, Stream, lowering_bug
from copyir.tables import small_groups
from copyir.validate.boxes import BufferIndex, EndKinds, resolve_ends
from copyir.validate.checks import check_header, check_instructions, check_loops
from copyir.validate.problems import StreamProblem


@dataclass(frozen=True)
class ResolvedEnds:
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

    layout: BufferIndex
    trace: Trace
    src: ResolvedEnds
    """The source of each start."""
    dst: ResolvedEnds
    """The destination of each start, computation and invalidation."""
    operands: list[ResolvedEnds]
    """Per operand position, the computations' operands."""
    width: int
    """The kinds of end per instruction row (see `ResolvedEnds.kind`)."""

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
    used = np.isin(op, schema.having("sem"))
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

    def access(events, label, space, address, strides, k=0) -> ResolvedEnds:
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
        return ResolvedEnds(events, ends.buffer, ends.offset, ends.lo, ends.hi, kinds)

    def own(end: str, label: str) -> ResolvedEnds:
        """An instruction's own end (`src` or `dst`), of the events whose
        instruction has it."""
        events = np.flatnonzero(np.isin(op, schema.having(f"{end}_space")))
        return access(
            events,
            label,
            table[f"{end}_space"],
            getattr(trace, f"{end}_address")[events],
            table[f"{end}_strides"].reshape(len(table), rank),
        )

    src, dst = own("src", "source"), own("dst", "destination")
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
