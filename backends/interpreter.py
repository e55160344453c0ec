"""The checking interpreter: runs a DMA stream on numpy arenas.

Compiling a stream does, once, all the work that needs no data:

1. `copyir.validate` checks every field and resolves each DMA end to a box
   of one buffer (out of bounds, a dtype mismatch and a stride pattern that
   is not a box are reported here, before anything runs);
2. `backends.protocol` decides the DMA protocol for the whole program
   (races, reads of memory nobody wrote, unsatisfiable waits, DMAs never
   waited), whatever the completion mode, and `backends.parallel` holds
   each parallel loop to its claim;
3. the completion mode decides when, inside its in-flight window, each DMA
   moves its data: `eager` at its start, `on_wait` inside the wait that
   needs its bytes, the most recently started first (as Pallas' interpret
   mode pops its pending DMAs), `random` at a random moment of its window
   (seeded). A correct program gives the same result in every mode.

Executing is then a loop over prepared copies and computations: each DMA end is an index
into a strided stack of views of its buffer (one stack per buffer, shape
and strides), so no view is built per copy in advance and none is checked
at run time.

Each run gets fresh memory, one array per buffer (sized to what the
program allocates): the arrays a run returns are its own, never changed by
a later run. An input parameter the program never writes
is read in place (read-only) instead of being copied. Bytes nobody ever
writes hold poison: every byte 0xFF, which is NaN in every float type, -1
in signed integers, the maximum in unsigned ones and True in bool.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import math
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ShapedType

from copyir import errors
from copyir.compute import Operand, compile_expression
from copyir.dtypes import BY_NAME, DTYPES
from copyir.errors import CopyIRError, CopyIRWarning, InvocationError, Note
from copyir.expand import Trace
from copyir.machine import MODES, POISON
from copyir.stream import (
    COMPUTE,
    INVALIDATE,
    START,
    WAIT,
    Buffer,
    Origin,
    Stream,
)
from copyir.tables import small_groups
from copyir.validate import ResolvedEnds, Validated, validate_stream

from . import coverage, parallel, protocol
from .inputs import as_input, check_inputs, check_names, fill_inputs

MAX_SEED = 2**63 - 1
STEPS_PER_BATCH = 1 << 15
"""Steps executed per batch of Python integers (bounds their memory)."""


# -- naming what the protocol reports ---------------------------------------------


@dataclass(frozen=True)
class _Namer:
    """Events by their origins and iterations, boxes in buffer indices."""

    stream: Stream
    trace: Trace

    def origin(self, event: int) -> Origin:
        return self.stream.origin(int(self.trace.row[event]))

    def fail(
        self, event: int, message: str, notes: tuple[Note, ...] = ()
    ) -> CopyIRError:
        return self.trace.fail(self.stream, event, message, notes)

    def site(self, event: int) -> Note:
        return Note("", self.origin(event).loc)

    def iteration(self, event: int) -> str:
        return self.trace.iteration(self.stream, event)

    def where(self, event: int) -> str:
        iteration = self.trace.iteration(self.stream, event)
        return f"{self.origin(event)}" + (f" at {iteration}" if iteration else "")

    def region(self, buffer: int, lo: np.ndarray, hi: np.ndarray) -> str:
        b = self.stream.buffers[buffer]
        parts = [f"{lo[d]}:{hi[d]}" for d in range(len(b.shape))]
        return f"{b.name}[{', '.join(parts)}]"

    def element(self, buffer: int, index: tuple[int, ...]) -> str:
        b = self.stream.buffers[buffer]
        return f"{b.name}[{', '.join(map(str, index[: len(b.shape)]))}]"

    def buffer_name(self, buffer: int) -> str:
        return self.stream.buffers[buffer].name

    def semaphore(self, sem: int) -> str:
        return self.stream.sem_name(sem)


# -- compiling ----------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    """A validated, expanded stream as the protocol's tables."""

    validated: Validated
    events: protocol.Events
    ends: protocol.BoxAccesses
    memory: protocol.Memory
    namer: _Namer

    @property
    def trace(self) -> Trace:
        return self.validated.trace

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

        return protocol.decide(
            self.events,
            self.ends,
            self.memory,
            self.namer,
            broken if levels else None,
        )


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
    ends = _protocol_ends(validated, op, add)
    layout = validated.layout
    memory = protocol.Memory(
        layout.shapes,
        layout.strides,
        np.array([b.param and b.name in provided for b in stream.buffers], bool),
        np.array([b.param for b in stream.buffers], bool),
    )
    validated = _without_boxes(validated)
    return Program(validated, events, ends, memory, _Namer(stream, validated.trace))


def _protocol_ends(validated: Validated, op: np.ndarray, add: np.ndarray):
    """The protocol's rows, filled in place (no part tables): two per DMA,
    its source then its destination (read too when the DMA adds); then
    each computation's operands (read), the computations' destinations
    (written) and the invalidations' boxes (made unwritten), all instant."""
    src, dst = validated.src, validated.dst
    count = len(src.events)
    pieces: list[tuple[ResolvedEnds, slice | np.ndarray, bool, bool]] = [
        (operand, slice(None), False, False) for operand in validated.operands
    ]
    for kind, invalidate in ((COMPUTE, False), (INVALIDATE, True)):
        pieces.append((dst, np.flatnonzero(op[dst.events] == kind), True, invalidate))
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
        first += size
    return ends


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


def trace_lines(stream: Stream) -> list[str]:
    """Every event of a stream in program order, one line each, as a user
    reads a schedule: `i = 1: start x[8:16, 0:128] -> buf[0:1, 0:8, 0:128]
    on sems[0]`, `wait sems[1] 4096`, `compute ...`, `invalidate ...`."""
    validated = validate_stream(stream)
    trace = validated.trace
    namer = _Namer(stream, trace)
    table = stream.instructions
    src, dst = validated.src, validated.dst
    src_at = dict(zip(src.events.tolist(), range(len(src.events)), strict=True))
    dst_at = dict(zip(dst.events.tolist(), range(len(dst.events)), strict=True))

    def box(access: ResolvedEnds, k: int) -> str:
        return namer.region(int(access.buffer[k]), access.lo[k], access.hi[k])

    lines = []
    for event, row in enumerate(trace.row.tolist()):
        op = int(table["op"][row])
        sem = stream.sem_name(int(trace.sem[event]))
        if op == START:
            text = (
                f"start {box(src, src_at[event])} -> {box(dst, dst_at[event])} on {sem}"
            )
        elif op == WAIT:
            text = f"wait {sem} {int(table['bytes'][row])}"
        elif op == COMPUTE:
            text = f"compute {box(dst, dst_at[event])}"
        else:
            text = f"invalidate {box(dst, dst_at[event])}"
        iteration = trace.iteration(stream, event)
        lines.append(f"{iteration}: {text}" if iteration else text)
    return lines


def check_stream(
    stream: Stream, provided: frozenset[str] | set[str] | None = None
) -> protocol.Verdict:
    """The data-free protocol check: validate the stream and decide the
    protocol, without arrays. Parameters count as inputs unless `provided`
    names the ones that are (so a read of a parameter is never reported
    as unwritten); scratch starts unwritten."""
    if provided is None:
        provided = frozenset(b.name for b in stream.buffers if b.param)
    return prepare(stream, frozenset(provided)).check()


def schedule(
    mode: str, seed: int, events: protocol.Events, verdict: protocol.Verdict
) -> tuple[np.ndarray, np.ndarray]:
    """When each DMA moves its data: (the event after which it moves, the
    DMA's start event), both in the order the moves happen."""
    starts, finish = verdict.starts, verdict.finish
    if mode == "eager":
        return starts.copy(), starts.copy()
    if mode == "random":
        rng = np.random.default_rng(seed)
        moment = starts + (rng.random(len(starts)) * (finish - starts)).astype(np.int64)
        ties = rng.permutation(len(starts))
        if (int(moment.max(initial=0)) + 1) * len(starts) < 2**62:
            # By moment, ties in a random order: one key, one sort.
            order = np.argsort(moment * len(starts) + ties)
        else:
            order = np.lexsort((ties, moment))
        return moment[order], starts[order]
    moves = _on_wait(events)
    return (
        np.array([m for m, _ in moves], np.int64),
        np.array([s for _, s in moves], np.int64),
    )


def _on_wait(events: protocol.Events) -> list[tuple[int, int]]:
    """Pending DMAs complete inside the wait that needs their bytes, the
    most recently started first (jax's interpret mode pops its list)."""
    pending: dict[int, list[int]] = {}
    arrived: dict[int, int] = {}
    consumed: dict[int, int] = {}
    moves = []
    kinds, sems, amounts = (
        x.tolist() for x in (events.kind, events.sem, events.amount)
    )
    for event, (kind, sem, amount) in enumerate(zip(kinds, sems, amounts, strict=True)):
        if kind == START:
            pending.setdefault(sem, []).append(event)
            continue
        stack = pending.get(sem, [])
        have = arrived.get(sem, 0) - consumed.get(sem, 0)
        while have < amount and stack:
            start = stack.pop()
            moves.append((event, start))
            have += amounts[start]
            arrived[sem] = arrived.get(sem, 0) + amounts[start]
        consumed[sem] = consumed.get(sem, 0) + amount
    return moves


# -- executing ----------------------------------------------------------------------


class Executable:
    """A stream compiled for one set of provided inputs and one mode.

    `run(inputs)` binds the inputs and executes the prepared copies; it may
    be called again with new inputs of the same names.
    """

    def __init__(
        self,
        stream: Stream,
        provided: frozenset[str] | set[str] = frozenset(),
        mode: str = "random",
        seed: int = 0,
    ):
        if mode not in MODES:
            raise CopyIRError(errors.RUN_UNKNOWN_MODE.format(mode=mode))
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise CopyIRError(errors.RUN_BAD_SEED.format(seed=seed))
        if not 0 <= seed <= MAX_SEED:
            raise CopyIRError(errors.RUN_BAD_SEED.format(seed=seed))
        self.stream = stream
        self.provided = frozenset(provided)
        order = _parallel_order(stream, mode, seed)
        if order:
            # The claims are checked in the program's own order, so that
            # every mode and seed reports the same broken claim; with them
            # kept, the permuted order gives the same verdict.
            prepare(stream, self.provided).check()
        program = prepare(stream, self.provided, order)
        verdict = program.check(claims=not order)
        self.verdict = verdict
        self.trace = program.trace
        self._moments, self._moved = schedule(mode, int(seed), program.events, verdict)
        self.params = {b.name: i for i, b in enumerate(stream.buffers) if b.param}
        written = set(np.unique(program.ends.buffer[program.ends.write]).tolist())
        self._aliased = {
            i for name, i in self.params.items() if name in self.provided
        } - written
        self._poison = self._unwritten(program, verdict)
        self._warn_partly_written(written)
        # Planning needs only the validated stream: the protocol's tables
        # go first, so that their memory is free for the plan's.
        validated = program.validated
        del program
        self._plan(validated)
        release_freed_memory()
        self._views: dict[int, np.ndarray] = {}
        self._bound: list = []
        self._memory: list = []

    @property
    def completions(self) -> list[tuple[int, int]]:
        """When each DMA moved its data: (the event after which it moved, its
        start event), in the order the moves happen."""
        return list(zip(self._moments.tolist(), self._moved.tolist(), strict=True))

    # -- what is written

    def _unwritten(self, program: Program, verdict) -> dict[int, list[tuple[int, int]]]:
        """Per buffer that is not an input, the element ranges nobody writes."""
        starts, ends = verdict.written
        bases = program.memory.bases
        gaps = {}
        for i, buffer in enumerate(self.stream.buffers):
            if program.memory.provided[i]:
                continue
            size = int(np.prod(buffer.shape, dtype=np.int64))
            base = int(bases[i])
            found = coverage.gaps(starts, ends, base, base + size)
            if found:
                gaps[i] = [(lo - base, hi - base) for lo, hi in found]
        return gaps

    def _warn_partly_written(self, written: set[int]) -> None:
        """An output that some DMA writes (buffers `written`), but not whole,
        keeps poison."""
        for i, gaps in self._poison.items():
            buffer = self.stream.buffers[i]
            if not buffer.param or i not in written:
                continue
            size = int(np.prod(buffer.shape, dtype=np.int64))
            unwritten = sum(hi - lo for lo, hi in gaps)
            first = np.unravel_index(gaps[0][0], buffer.shape) if buffer.shape else ()
            index = ", ".join(str(int(x)) for x in first)
            warnings.warn(
                CopyIRWarning(
                    errors.RUN_PARTLY_WRITTEN.format(
                        name=buffer.name,
                        unwritten=unwritten,
                        size=size,
                        first=f"{buffer.name}[{index}]",
                    ),
                    buffer.loc,
                ),
                stacklevel=3,
            )

    # -- the copies

    def _plan(self, validated: Validated) -> None:
        """Each step as (source, offset, destination stack, offset, kind), in
        the order it happens: a DMA's data move at its moment (kind 0 copies,
        1 adds), a computation at its event (kind 2: the source is its
        function and the offset its operands' stacks and offsets). A stack
        is one (buffer, shape, strides) of a kind of end."""
        self._signatures: list[tuple[int, tuple, tuple]] = []
        index: dict[tuple, int] = {}
        table = self.stream.instructions

        def stacks_of(access: ResolvedEnds, end: str) -> np.ndarray:
            """Each end's stack: one per (buffer, shape, strides), found once
            per (kind, buffer) pair."""
            nb = len(self.stream.buffers)
            key = access.kind * nb + access.buffer
            kinds, _, group = small_groups(key)
            numbers = []
            for k in kinds.tolist():
                kind, buffer = divmod(k, nb)
                row = kind // validated.width
                rank = int(table["rank"][row])
                shape = tuple(int(x) for x in table["shape"][row][:rank])
                sig = (buffer, shape, validated.strides(self.stream, kind, end))
                if sig not in index:
                    index[sig] = len(self._signatures)
                    self._signatures.append(sig)
                numbers.append(index[sig])
            return np.array(numbers, np.int64)[group]

        src, dst = validated.src, validated.dst
        src_stack, dst_stack = stacks_of(src, "src"), stacks_of(dst, "dst")
        rows = validated.trace.row
        dma = np.searchsorted(src.events, self._moved)  # each move's DMA
        at = np.searchsorted(dst.events, self._moved)
        moves = np.stack(
            [
                table["add"][rows[self._moved]].astype(np.int64),
                src_stack[dma] if len(dma) else dma,
                src.offset[dma],
                dst_stack[at] if len(at) else at,
                dst.offset[at],
            ],
            axis=1,
        )
        self._functions: list = []
        self._operands: list[list[tuple[int, int]]] = []
        computes = np.flatnonzero(table["op"][rows] == COMPUTE)
        if len(computes):
            steps = self._compute_steps(validated, computes, stacks_of, dst_stack)
            # Computations run at their event, moves after the event they
            # follow.
            key = np.concatenate([computes * 2, self._moments * 2 + 1])
            order = np.argsort(key, kind="stable")
            moves = np.concatenate([steps, moves])[order]
        self._steps = self._contiguous_copies(moves)

    def _contiguous_copies(self, steps: np.ndarray) -> np.ndarray:
        """The steps with a sixth column: a copy between two boxes that are
        each one run of consecutive elements (a block of rows, a window
        slot) becomes kind 3, a copy of bytes between the buffers' flat
        memory: (3, source buffer, its first byte, destination buffer, its
        first byte, bytes). Executing one is a slice assignment of two
        memoryviews, several times cheaper than `np.copyto` on two views
        (the elements are the same bytes; copies keep every bit, NaNs
        included)."""
        count = len(self._signatures)
        buffer = np.array([sig[0] for sig in self._signatures] + [0], np.int64)
        item = np.array(
            [BY_NAME[self.stream.buffers[b].dtype].itemsize for b in buffer], np.int64
        )
        length = np.array(
            [_run_length(shape, strides) for _, shape, strides in self._signatures]
            + [0],
            np.int64,
        )
        out = np.zeros((len(steps), 6), np.int64)
        out[:, :5] = steps
        if not len(steps):
            return out
        kind, a, b, c, d = (steps[:, k] for k in range(5))
        src, dst = np.where(kind == 0, a, count), np.where(kind == 0, c, count)
        run = (length[src] > 0) & (length[src] == length[dst])
        out[run, 0] = 3
        out[run, 1], out[run, 2] = buffer[a[run]], b[run] * item[a[run]]
        out[run, 3], out[run, 4] = buffer[c[run]], d[run] * item[c[run]]
        out[run, 5] = length[a[run]] * item[a[run]]
        return out

    def _compute_steps(self, validated: Validated, computes, stacks_of, dst_stack):
        """The steps of the computations (events `computes`), all at once:
        a computation that only copies an operand (`$0`) is a copy (kind
        0); any other is kind 2, with its function and the index of its
        operands' (stack, offset) pairs in `_operands`."""
        table = self.stream.instructions
        number = table["compute"][validated.trace.row[computes]].astype(np.int64)
        specs = self.stream.computes
        counts = np.array([0] + [len(c.operands) for c in specs], np.int64)
        at = np.searchsorted(validated.dst.events, computes)
        dst = np.stack([dst_stack[at], validated.dst.offset[at]], axis=1)
        # Every computation's operands as (stack, offset) pairs; positions
        # past its own count repeat its destination (never read).
        pairs = np.repeat(dst[:, None, :], len(validated.operands), axis=1)
        for k, operand in enumerate(validated.operands):
            has = k < counts[number]
            mine = np.searchsorted(operand.events, computes[has])
            pairs[has, k, 0] = stacks_of(operand, "src")[mine]
            pairs[has, k, 1] = operand.offset[mine]
        copied = np.full(len(specs) + 1, -1, np.int64)
        function = np.zeros(len(specs) + 1, np.int64)
        kinds, first = np.unique(number, return_index=True)
        for n, j in zip(kinds.tolist(), first.tolist(), strict=True):
            expression = specs[n - 1].tree
            if isinstance(expression, Operand):
                copied[n] = expression.index
                continue
            function[n] = len(self._functions)
            dtype = DTYPES[int(table["dtype"][validated.trace.row[computes[j]]])].numpy
            self._functions.append(compile_expression(expression, dtype))
        steps = np.zeros((len(computes), 5), np.int64)
        steps[:, 3:] = dst
        copy = copied[number] >= 0
        steps[copy, 1:3] = pairs[np.flatnonzero(copy), copied[number[copy]]]
        general = np.flatnonzero(~copy)
        steps[general, 0] = 2
        steps[general, 1] = function[number[general]]
        steps[general, 2] = np.arange(len(general))
        self._operands = [
            list(zip(row[0::2], row[1::2], strict=True))
            for row in pairs[general].reshape(len(general), 2 * pairs.shape[1]).tolist()
        ]
        return steps

    def _stacks(self, flats: dict[int, np.ndarray]) -> list[np.ndarray]:
        """One strided stack per signature: `stack[offset]` is the box of
        that shape and strides starting at element `offset` of the buffer."""
        stacks = []
        for buffer, shape, strides in self._signatures:
            flat = flats[buffer]
            if not shape:  # a single element: one-element boxes
                shape, strides = (1,), (1,)
            # A dimension of one element never steps: its stride, however
            # large a hand-made stream made it, is no part of the view.
            strides = tuple(
                0 if n == 1 else s for n, s in zip(shape, strides, strict=True)
            )
            reach = sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
            item = flat.itemsize
            stacks.append(
                np.lib.stride_tricks.as_strided(
                    flat,
                    shape=(flat.size - reach, *shape),
                    strides=(item, *(s * item for s in strides)),
                    writeable=flat.flags.writeable,
                )
            )
        return stacks

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Bind the inputs, execute, and return every parameter's final value."""
        check_inputs(self.stream, inputs)
        if frozenset(inputs) != self.provided:
            raise InvocationError(
                f"This stream was compiled for inputs {sorted(self.provided)}, "
                f"not {sorted(inputs)}"
            )
        views = self._fresh_views()
        flats = {i: v.reshape(-1) for i, v in views.items()}
        for name, value in inputs.items():
            i = self.params[name]
            array = as_input(value, BY_NAME[self.stream.buffers[i].dtype].numpy)
            if i in self._aliased:
                view = array.view()
                view.flags.writeable = False
                views[i] = view
                flats[i] = np.ascontiguousarray(view).reshape(-1)
            else:
                np.copyto(views[i], array)
        self._memory = [
            flats[i].view(np.uint8).data if i in flats else None
            for i in range(len(self.stream.buffers))
        ]
        self._views = views
        self._bound = self._stacks(flats)
        with np.errstate(all="ignore"):  # overflow and NaN are the semantics
            self.execute()
        return {name: views[i] for name, i in self.params.items()}

    def _fresh_views(self) -> dict[int, np.ndarray]:
        """New memory for one run, one array per buffer (buffers never share
        bytes), poison where nobody writes."""
        views = {}
        for i, buffer in enumerate(self.stream.buffers):
            if i in self._aliased:
                continue
            data = _arena(buffer.space, buffer.nbytes)
            views[i] = data.view(BY_NAME[buffer.dtype].numpy).reshape(buffer.shape)
            item = BY_NAME[buffer.dtype].itemsize
            for lo, hi in self._poison.get(i, ()):
                data[lo * item : hi * item] = POISON
        return views

    def buffer(self, name: str) -> np.ndarray:
        """Any buffer's contents after the last run, scratch included."""
        for i, buffer in enumerate(self.stream.buffers):
            if buffer.name == name and i in self._views:
                return self._views[i]
        raise KeyError(name)

    def execute(self) -> None:
        """Move the data, in completion order, with the last run's inputs.

        `run` calls it; calling it again re-executes on memory as it is (what
        the benchmarks time: the compiled stream alone). The steps are read
        as Python integers a chunk at a time, so that their lists stay
        small.
        """
        copyto, add_to = np.copyto, np.add
        stacks, functions, operands = self._bound, self._functions, self._operands
        memory = self._memory
        for first in range(0, len(self._steps), STEPS_PER_BATCH):
            columns = self._steps[first : first + STEPS_PER_BATCH].T.tolist()
            for kind, a, b, c, d, n in zip(*columns, strict=True):
                if kind == 3:
                    memory[c][d : d + n] = memory[a][b : b + n]
                elif kind == 0:
                    copyto(stacks[c][d], stacks[a][b])
                elif kind == 1:
                    target = stacks[c][d]
                    add_to(target, stacks[a][b], out=target)
                else:
                    args = [stacks[stack][offset] for stack, offset in operands[b]]
                    copyto(stacks[c][d], functions[a](args))


def release_freed_memory() -> None:
    """Hand the memory that compiling freed back to the system (glibc only;
    elsewhere nothing happens).

    Compiling a large stream makes and frees many tables of a few MiB each.
    glibc serves those from its heap once it has raised its mmap threshold,
    and keeps their pages when they are freed; a run would then allocate
    its arenas on top of that dead weight (about 200 MiB for 400,000 DMAs).
    `malloc_trim(0)` returns every free page of the heap."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def _run_length(shape: tuple, strides: tuple) -> int:
    """The elements of a box of this shape and these strides when they are
    one run of consecutive elements (dense, row-major), else 0."""
    dims = [(n, s) for n, s in zip(shape, strides, strict=True) if n != 1]
    extents = [n for n, _ in dims]
    dense = tuple(s for _, s in dims) == ShapedType.strides_for_shape(extents)
    return math.prod(extents) if dense else 0


def _parallel_order(stream: Stream, mode: str, seed: int) -> dict[int, np.ndarray]:
    """In random mode, the iterations of each parallel loop run in a seeded
    permuted order (the stream says they do not depend on each other)."""
    if mode != "random":
        return {}
    rng = np.random.default_rng([seed, 1])
    return {
        number: rng.permutation(loop.trip_count)
        for number, loop in enumerate(stream.loops, start=1)
        if loop.parallel
    }


def compile_stream(
    stream: Stream,
    provided: frozenset[str] | set[str] = frozenset(),
    mode: str = "random",
    seed: int = 0,
) -> Executable:
    """Check and compile a stream; see `Executable`."""
    return Executable(stream, provided, mode, seed)


def _arena(space: str, size: int) -> np.ndarray:
    try:
        return np.empty(size, np.uint8)
    except (MemoryError, ValueError) as err:  # the machine cannot hold it
        raise CopyIRError(
            errors.CANNOT_ALLOCATE.format(size=size, space=space, why=err)
        ) from None


def run_stream(
    stream: Stream,
    inputs: Mapping[str, np.ndarray],
    mode: str = "random",
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Check the inputs, compile for them, and run once."""
    check_inputs(stream, inputs)
    return Executable(stream, frozenset(inputs), mode, seed).run(inputs)


__all__ = [
    "DTYPES",
    "MODES",
    "POISON",
    "Buffer",
    "Executable",
    "Origin",
    "as_input",
    "check_stream",
    "compile_stream",
    "fill_inputs",
    "run_stream",
    "trace_lines",
]
