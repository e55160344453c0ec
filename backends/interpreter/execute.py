"""Executing a stream: a compiled program's data moves and computations on
fresh numpy arenas.

`Executable` compiles once (prepare and check the program, ask the
completion model for its schedule, plan each step) and then runs a loop
over prepared copies and computations: each DMA end is an index into a
strided stack of views of its buffer (one stack per buffer, shape and
strides), so no view is built per copy in advance and none is checked at
run time.

Each run gets fresh memory, one array per buffer (sized to what the
program allocates): the arrays a run returns are its own, never changed by
a later run. An input parameter the program never writes
is read in place (read-only) instead of being copied. Elements nobody
ever writes hold poison (`copyir.machine.poison`: Pallas' interpret mode's
uninitialized values, NaN in floats, the maximum in integers, True in
bool); an opaque computation writes the same poison (`poison.py` reports
an output left holding it).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import numpy as np
from xdsl.dialects.builtin import ShapedType

from copyir import errors
from copyir.compute import Operand, compile_expression
from copyir.dtypes import BY_NAME, DTYPES
from copyir.errors import CopyIRWarning, InvocationError
from copyir.machine import PADDING, poison
from copyir.stream import COMPUTE, OPAQUE, Stream
from copyir.tables import small_groups
from copyir.validate import ResolvedEnds, Validated

from .. import coverage
from .completion import CompletionModel, completion_model
from .inputs import as_input, check_inputs
from .memory import arena, release_freed_memory
from .poison import KEEP_STEP, POISON_STEP, opaque_outputs
from .program import Program, prepare

STEPS_PER_BATCH = 1 << 15
"""Steps executed per batch of Python integers (bounds their memory)."""


class Executable:
    """A stream compiled for one set of provided inputs and one completion
    model (a mode's name, `completion.MODELS`, or a model itself).

    `run(inputs)` binds the inputs and executes the prepared copies; it may
    be called again with new inputs of the same names.
    """

    def __init__(
        self,
        stream: Stream,
        provided: frozenset[str] | set[str] = frozenset(),
        mode: str | CompletionModel = "random",
        seed: int = 0,
    ):
        model = (
            mode if isinstance(mode, CompletionModel) else completion_model(mode, seed)
        )
        self.stream = stream
        self.provided = frozenset(provided)
        order = model.iteration_order(stream)
        if order:
            # The claims are checked in the program's own order, so that
            # every mode and seed reports the same broken claim; with them
            # kept, the permuted order gives the same verdict.
            prepare(stream, self.provided).check()
        program = prepare(stream, self.provided, order)
        verdict = program.check(claims=not order)
        program.warn_stale(verdict)
        self.verdict = verdict
        self.trace = program.trace
        self.schedule = model.schedule(program.protocol)
        self._moments, self._moved = self.schedule.moments, self.schedule.moved
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
        self._warn_opaque_outputs()
        release_freed_memory()
        self._views: dict[int, np.ndarray] = {}
        self._bound: list = []
        self._memory: list = []

    @property
    def completions(self) -> list[tuple[int, int]]:
        """When each DMA moved its data: (the event after which it moved, its
        start event), in the order the moves happen."""
        return self.schedule.completions

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

    def _warn_opaque_outputs(self) -> None:
        """An output left holding an opaque computation's poison is no
        data: a warning at the opaque computation, as for an output left
        partly unwritten (see `poison.py`); the padding of a cut block
        (`PADDING`) is worded as such."""
        found = opaque_outputs(
            self.stream, self._steps, self._operands, self._arities, self._stacks
        )
        for each in found:
            buffer = self.stream.buffers[each.buffer]
            first = np.unravel_index(each.first, buffer.shape) if buffer.shape else ()
            index = ", ".join(str(int(x)) for x in first)
            origin = self.stream.origin(each.row)
            label = self.stream.labels[
                int(self.stream.instructions["label"][each.row]) - 1
            ]
            words = {
                "name": buffer.name,
                "count": each.count,
                "size": int(np.prod(buffer.shape, dtype=np.int64)),
                "first": f"{buffer.name}[{index}]",
            }
            message = (
                errors.RUN_PADDING_OUTPUT.format(**words)
                if label == PADDING
                else errors.RUN_OPAQUE_OUTPUT.format(what=label, **words)
            )
            warnings.warn(CopyIRWarning(message, origin.loc), stacklevel=3)

    # -- the copies

    def _plan(self, validated: Validated) -> None:
        """Each step as (source, offset, destination stack, offset, kind), in
        the order it happens: a DMA's data move at its moment (kind 0 copies,
        1 adds), a computation at its event (kind 2: the source is its
        function and the offset its operands' stacks and offsets), an
        opaque computation's write at its event (kind 4: the source is the
        dtype code of its poison and the offset its instruction row; kind 5
        for one that keeps the bytes, which only the markers of `poison.py`
        see). A
        stack is one (buffer, shape, strides) of a kind of end."""
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
        self._arities: list[int] = []
        self._operands: list[list[list[int]]] = []
        computes = np.flatnonzero(table["op"][rows] == COMPUTE)
        poisons = np.flatnonzero((table["op"][rows] == OPAQUE) & table["writes"][rows])
        if len(computes) or len(poisons):
            steps = self._compute_steps(validated, computes, stacks_of, dst_stack)
            at = np.searchsorted(dst.events, poisons)
            poisoned = np.stack(
                [
                    np.where(
                        table["keeps"][rows[poisons]], KEEP_STEP, POISON_STEP
                    ).astype(np.int64),
                    table["dtype"][rows[poisons]].astype(np.int64),
                    rows[poisons],
                    dst_stack[at] if len(at) else at,
                    dst.offset[at],
                ],
                axis=1,
            )
            # Computations run at their event, moves after the event they
            # follow.
            key = np.concatenate([computes * 2, poisons * 2, self._moments * 2 + 1])
            order = np.argsort(key, kind="stable")
            moves = np.concatenate([steps, poisoned, moves])[order]
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
            self._arities.append(len(specs[n - 1].operands))
        steps = np.zeros((len(computes), 5), np.int64)
        steps[:, 3:] = dst
        copy = copied[number] >= 0
        steps[copy, 1:3] = pairs[np.flatnonzero(copy), copied[number[copy]]]
        general = np.flatnonzero(~copy)
        steps[general, 0] = 2
        steps[general, 1] = function[number[general]]
        steps[general, 2] = np.arange(len(general))
        # Each computation's (stack, offset) pairs as lists, made in C.
        self._operands = pairs[general].tolist()
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
            dtype = BY_NAME[buffer.dtype].numpy
            flat = arena(buffer.space, buffer.nbytes).view(dtype)
            views[i] = flat.reshape(buffer.shape)
            for lo, hi in self._poison.get(i, ()):
                flat[lo:hi] = poison(dtype)
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
        memory, poisons = self._memory, _POISONS
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
                elif kind == POISON_STEP:
                    copyto(stacks[c][d], poisons[a])
                elif kind == 2:
                    args = [stacks[stack][offset] for stack, offset in operands[b]]
                    copyto(stacks[c][d], functions[a](args))


_POISONS = [poison(d.numpy) for d in DTYPES]
"""Per dtype code, its poison element (copied as is: a NaN keeps its
bits)."""


def _run_length(shape: tuple, strides: tuple) -> int:
    """The elements of a box of this shape and these strides when they are
    one run of consecutive elements (dense, row-major), else 0."""
    dims = [(n, s) for n, s in zip(shape, strides, strict=True) if n != 1]
    extents = [n for n, _ in dims]
    dense = tuple(s for _, s in dims) == ShapedType.strides_for_shape(extents)
    return math.prod(extents) if dense else 0


def compile_stream(
    stream: Stream,
    provided: frozenset[str] | set[str] = frozenset(),
    mode: str = "random",
    seed: int = 0,
) -> Executable:
    """Check and compile a stream; see `Executable`."""
    return Executable(stream, provided, mode, seed)


def run_stream(
    stream: Stream,
    inputs: Mapping[str, np.ndarray],
    mode: str | CompletionModel = "random",
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Check the inputs, compile for them, and run once (`mode` a mode's
    name or a completion model)."""
    check_inputs(stream, inputs)
    return Executable(stream, frozenset(inputs), mode, seed).run(inputs)
