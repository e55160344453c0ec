"""The checking interpreter: runs a DMA stream on numpy arenas.

Compiling a stream does, once, all the work that needs no data. It follows
the DMA protocol instruction by instruction: semaphores count bytes, and a
DMA on semaphore s is finished at the first wait on s after it at which the
bytes consumed by the waits on s reach the bytes of all DMAs started on s so
far (DESIGN's rule). Until then the DMA is in flight, and nothing else may
read or write its destination or write its source. Compiling reports, at
the instruction that causes it:

- an access out of bounds of every buffer;
- a race, by that rule, whatever a completion order would happen to do,
  naming both sites;
- a read of memory nobody wrote (inputs and finished DMAs write);
- a wait that no DMA in flight can satisfy (never a hang);
- at the end, DMAs still in flight and semaphores not at zero.

It also decides, for the completion mode, when each DMA moves its data:
`eager` at its start, `on_wait` inside the wait that needs its bytes (as
Pallas' interpret mode does), `random` at random moments of its in-flight
window (seeded). A correct program gives the same result in every mode.
Executing is then a loop over prepared numpy copies: no instruction is
dispatched at run time.

Memory is one arena per space, sized to what the program allocates, laid
out as assign-addresses decided. An input parameter the program never
writes is read in place (read-only) instead of being copied into HBM. Bytes
nobody ever writes hold poison: every byte 0xFF, which is NaN in every float
type, -1 in signed integers, the maximum in unsigned ones and True in bool.
"""

from __future__ import annotations

import bisect
import collections
import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from copyir import errors
from copyir.dtypes import BY_NAME, DTYPES
from copyir.errors import CopyIRError, Note
from copyir.stream import SPACES, START, Buffer, Origin, Stream, row_major

POISON = 0xFF
MODES = ("random", "eager", "on_wait")


# -- regions --------------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    """One end of a DMA: a strided box of elements inside one buffer."""

    buffer: int
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    lo: int
    hi: int
    slices: tuple[slice, ...] | None
    """The box as a slice per buffer dimension, when its strides are the
    buffer's own (always, for streams copyir lowers)."""

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _decompose(
    buffer: Buffer, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]
) -> tuple[slice, ...] | None:
    """Per-dimension slices of the buffer that make up the box, if any."""
    dims, buffer_strides = buffer.shape, row_major(buffer.shape)
    start = list(np.unravel_index(offset, dims)) if dims else []
    stop = [i + 1 for i in start]
    last = -1
    for extent, stride in zip(shape, strides, strict=True):
        if extent == 1:
            continue
        dim = next(
            (d for d, s in enumerate(buffer_strides) if s == stride and dims[d] > 1),
            None,
        )
        if dim is None or dim <= last or start[dim] + extent > dims[dim]:
            return None  # not the buffer's own layout: handled element-wise
        last = dim
        stop[dim] = start[dim] + extent
    return tuple(slice(int(a), int(b)) for a, b in zip(start, stop, strict=True))


def _strided(flat: np.ndarray, box: Box) -> np.ndarray:
    """The box as a view of a buffer's flat array of elements."""
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(
        flat[box.offset :],
        shape=box.shape,
        strides=tuple(s * item for s in box.strides),
        writeable=flat.flags.writeable,
    )


def _overlap(a: Box, b: Box, buffers: list[Buffer]) -> bool:
    """Whether two boxes share an element (exactly, not by span alone)."""
    if a.buffer != b.buffer or a.hi <= b.lo or b.hi <= a.lo:
        return False
    if a.slices is not None and b.slices is not None:
        return all(
            x.start < y.stop and y.start < x.stop
            for x, y in zip(a.slices, b.slices, strict=True)
        )
    count = int(np.prod(buffers[a.buffer].shape, dtype=np.int64))
    mask = np.zeros(count, dtype=bool)
    _strided(mask, a)[...] = True
    return bool(_strided(mask, b).any())


class _Written:
    """Which elements of one buffer hold written data."""

    def __init__(self, buffer: Buffer):
        self.buffer = buffer
        self.full = False
        self.mask: np.ndarray | None = None

    def mark(self, box: Box) -> None:
        if self.full:
            return
        if box.slices is not None and all(
            s.start == 0 and s.stop == n
            for s, n in zip(box.slices, self.buffer.shape, strict=True)
        ):
            self.full, self.mask = True, None
            return
        if self.mask is None:
            self.mask = np.zeros(self.buffer.shape, dtype=bool)
        self._view(box)[...] = True

    def mark_all(self) -> None:
        self.full, self.mask = True, None

    @functools.cached_property
    def count(self) -> int:
        return int(np.prod(self.buffer.shape, dtype=np.int64))

    def first_unwritten(self, box: Box) -> tuple[int, ...] | None:
        """The buffer index of the box's first unwritten element, or None."""
        if self.full:
            return None
        if self.mask is None:
            return _index_of(self.buffer, box, ())
        view = self._view(box)
        if view.all():
            return None
        local = np.unravel_index(np.argmin(view), view.shape)
        if box.slices is not None:  # the view keeps the buffer's dimensions
            return tuple(
                int(s.start + i) for s, i in zip(box.slices, local, strict=True)
            )
        return _index_of(self.buffer, box, local)

    def unwritten_flat(self) -> np.ndarray | None:
        """The never-written elements as a flat mask (None when all are)."""
        if self.full:
            return np.zeros(self.count, dtype=bool)
        if self.mask is None:
            return None
        return ~self.mask.reshape(-1)

    def _view(self, box: Box) -> np.ndarray:
        if box.slices is not None:
            return self.mask[(*box.slices, ...)]
        return _strided(self.mask.reshape(-1), box)


def _index_of(buffer: Buffer, box: Box, local: tuple) -> tuple[int, ...]:
    """The buffer index of an element given by its index inside the box
    (`()` for the box's first element)."""
    offset = box.offset + sum(
        int(i) * s for i, s in zip(local, box.strides, strict=False)
    )
    return tuple(int(i) for i in np.unravel_index(offset, buffer.shape))


# -- compiling: the protocol, followed once -------------------------------------


@dataclass
class _Dma:
    index: int
    sem: int
    bytes: int
    src: Box
    dst: Box
    add: bool
    complete: bool = False


class _Spans:
    """Byte spans [lo, hi) of DMAs in flight on one buffer, sorted by lo.

    A query scans back from the spans that start before its end, and stops
    once no span could reach its start (none is longer than `longest`), so
    DMAs spread over a buffer are not all compared with each other.
    """

    def __init__(self):
        self.los: list[int] = []
        self.spans: list[tuple[int, int, _Dma]] = []
        self.longest = 0

    def add(self, lo: int, hi: int, dma: _Dma) -> None:
        at = bisect.bisect_right(self.los, lo)
        self.los.insert(at, lo)
        self.spans.insert(at, (lo, hi, dma))
        self.longest = max(self.longest, hi - lo)

    def remove(self, finished: set[int]) -> None:
        kept = [s for s in self.spans if id(s[2]) not in finished]
        self.spans, self.los = kept, [s[0] for s in kept]

    def meeting(self, lo: int, hi: int) -> list[_Dma]:
        found = []
        for at in range(bisect.bisect_left(self.los, hi) - 1, -1, -1):
            start, end, dma = self.spans[at]
            if start + self.longest <= lo:
                break
            if end > lo:
                found.append(dma)
        return found


@dataclass
class _Semaphore:
    started: int = 0
    arrived: int = 0
    consumed: int = 0
    pending: list[_Dma] = field(default_factory=list)


class _Compiler:
    """Follows the protocol once: checks it, and schedules the data moves."""

    def __init__(self, stream: Stream, provided: frozenset[str], mode: str, seed: int):
        self.stream = stream
        self.buffers = stream.buffers
        self.mode = mode
        self.rng = random.Random(seed)
        self.by_space: dict[int, list[tuple[int, int]]] = {}
        for i, buffer in enumerate(self.buffers):
            space = SPACES.index(buffer.space)
            self.by_space.setdefault(space, []).append((buffer.address, i))
        for entries in self.by_space.values():
            entries.sort()
        self.written = [_Written(b) for b in self.buffers]
        for i, buffer in enumerate(self.buffers):
            if buffer.param and buffer.name in provided:
                self.written[i].mark_all()
        self.sems: dict[int, _Semaphore] = collections.defaultdict(_Semaphore)
        self.in_flight: list[_Dma] = []
        self.touching: dict[int, _Spans] = collections.defaultdict(_Spans)
        """Per buffer, the byte spans of the DMAs in flight that touch it, so
        that a start is compared only with the DMAs near it."""
        self.moving: list[_Dma] = []
        """DMAs in flight whose data has not moved yet (random mode)."""
        self.schedule: list[tuple[int, int]] = []
        self.now = 0
        self.dmas: dict[int, _Dma] = {}
        self.writes = [False] * len(self.buffers)
        self.boxes: dict[tuple, Box] = {}

    # -- errors

    def fail(self, index: int, message: str, notes: tuple[Note, ...] = ()):
        origin = self.stream.origin(index)
        if origin.detail:
            message = f"{message}, at {origin.detail}"
        return CopyIRError(message, origin.loc, notes)

    def region(self, box: Box) -> str:
        buffer = self.buffers[box.buffer]
        if box.slices is None:
            item = BY_NAME[buffer.dtype].itemsize
            start = box.offset * item
            return f"{buffer.name} (bytes {start}:{start + box.hi - box.lo})"
        parts = [f"{s.start}:{s.stop}" for s in box.slices]
        return f"{buffer.name}[{', '.join(parts)}]"

    def where(self, dma: _Dma) -> str:
        return str(self.stream.origin(dma.index))

    # -- boxes

    def box(self, index: int, end: str, space: int, address: int, entry) -> Box:
        """The box of one DMA end; streams repeat a few, so they are cached."""
        key = (
            end,
            space,
            address,
            int(entry["dtype"]),
            int(entry["rank"]),
            entry["shape"].tobytes(),
            entry[f"{end}_strides"].tobytes(),
        )
        box = self.boxes.get(key)
        if box is None:
            box = self.boxes[key] = self.new_box(index, end, space, address, entry)
        return box

    def new_box(self, index: int, end: str, space: int, address: int, entry) -> Box:
        rank = int(entry["rank"])
        shape = tuple(int(x) for x in entry["shape"][:rank])
        strides = tuple(int(x) for x in entry[f"{end}_strides"][:rank])
        item = DTYPES[entry["dtype"]].itemsize
        lo = address + item * sum(
            min(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True)
        )
        hi = address + item * (
            sum(max(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True)) + 1
        )
        label = "source" if end == "src" else "destination"
        span = f"{SPACES[space]}[{lo}:{hi}]"
        entries = self.by_space.get(space, [])
        position = bisect.bisect_right(entries, (lo, len(self.buffers))) - 1
        if position < 0:
            raise self.fail(
                index,
                errors.RUN_OUT_OF_BOUNDS.format(
                    end=label,
                    region=span,
                    why=f"it lies outside every {SPACES[space]} buffer",
                ),
            )
        start, number = entries[position]
        buffer = self.buffers[number]
        end_of_buffer = start + buffer.nbytes
        if lo >= end_of_buffer or hi > end_of_buffer:
            why = (
                f"it runs past the end of buffer {buffer.name} "
                f"({buffer.space}[{start}:{end_of_buffer}])"
                if lo < end_of_buffer
                else f"it lies outside every {SPACES[space]} buffer"
            )
            raise self.fail(
                index, errors.RUN_OUT_OF_BOUNDS.format(end=label, region=span, why=why)
            )
        held = BY_NAME[buffer.dtype]
        if held.itemsize != item or (address - start) % item:
            raise self.fail(
                index,
                errors.RUN_MISMATCHED_BUFFER.format(
                    end=label,
                    dtype=DTYPES[entry["dtype"]].name,
                    name=buffer.name,
                    held=held.name,
                ),
            )
        offset = (address - start) // item
        return Box(
            number,
            offset,
            shape,
            strides,
            lo,
            hi,
            _decompose(buffer, offset, shape, strides),
        )

    # -- the walk

    def run(self) -> None:
        table = self.stream.instructions
        for index in range(len(table)):
            entry = table[index]
            self.now = index
            if self.mode == "random":
                self.complete_some()
            if entry["op"] == START:
                self.start(index, entry)
            else:
                self.wait(index, int(entry["sem"]), int(entry["bytes"]))
        self.finish()

    def start(self, index: int, entry) -> None:
        src = self.box(
            index, "src", int(entry["src_space"]), int(entry["src_address"]), entry
        )
        dst = self.box(
            index, "dst", int(entry["dst_space"]), int(entry["dst_address"]), entry
        )
        if _overlap(src, dst, self.buffers):
            raise self.fail(
                index,
                errors.RUN_SELF_OVERLAP.format(
                    src=self.region(src), dst=self.region(dst)
                ),
            )
        dma = _Dma(
            index, int(entry["sem"]), int(entry["bytes"]), src, dst, bool(entry["add"])
        )
        self.check_races(dma)
        for box in (src, dst) if dma.add else (src,):
            first = self.written[box.buffer].first_unwritten(box)
            if first is not None:
                buffer = self.buffers[box.buffer]
                raise self.fail(
                    index,
                    errors.RUN_UNINITIALIZED.format(
                        region=self.region(box),
                        first=f"{buffer.name}[{', '.join(map(str, first))}]",
                    ),
                )
        self.writes[dst.buffer] = True
        semaphore = self.sems[dma.sem]
        semaphore.started += dma.bytes
        semaphore.pending.append(dma)
        self.in_flight.append(dma)
        for box in {src.buffer: src, dst.buffer: dst}.values():
            self.touching[box.buffer].add(box.lo, box.hi, dma)
        self.moving.append(dma)
        self.dmas[index] = dma
        if self.mode == "eager":
            self.complete(dma)

    def check_races(self, dma: _Dma) -> None:
        """The new DMA against every DMA in flight whose spans meet its own,
        the earliest started first."""
        nearby = {
            other.index: other
            for box in (dma.src, dma.dst)
            if box.buffer in self.touching
            for other in self.touching[box.buffer].meeting(box.lo, box.hi)
        }
        for index in sorted(nearby):
            self.check_race(dma, nearby[index])

    def check_race(self, dma: _Dma, other: _Dma) -> None:
        conflicts = (
            ("writes", dma.dst, "writes", other.dst),
            ("writes", dma.dst, "reads", other.src),
            ("reads", dma.src, "writes", other.dst),
        )
        for action, mine, their, theirs in conflicts:
            if _overlap(mine, theirs, self.buffers):
                origin = self.stream.origin(other.index)
                raise self.fail(
                    dma.index,
                    errors.RUN_RACE.format(
                        action=action,
                        region=self.region(mine),
                        other=origin,
                        their=their,
                    ),
                    (Note("the DMA in flight started here", origin.loc),),
                )

    def wait(self, index: int, sem: int, need: int) -> None:
        semaphore = self.sems[sem]
        available = semaphore.started - semaphore.consumed
        if need > available:
            raise self.fail(
                index,
                errors.RUN_UNSATISFIABLE_WAIT.format(
                    sem=self.stream.sem_name(sem), need=need, available=available
                ),
            )
        while semaphore.arrived - semaphore.consumed < need:
            incomplete = [d for d in semaphore.pending if not d.complete]
            chosen = (
                incomplete[0] if self.mode != "random" else self.rng.choice(incomplete)
            )
            self.complete(chosen)
        semaphore.consumed += need
        if semaphore.consumed >= semaphore.started:  # DESIGN's rule: all finished
            finished = {id(dma) for dma in semaphore.pending}
            buffers = set()
            for dma in semaphore.pending:
                self.written[dma.dst.buffer].mark(dma.dst)
                buffers.update((dma.src.buffer, dma.dst.buffer))
            for buffer in buffers:
                self.touching[buffer].remove(finished)
            self.in_flight = [d for d in self.in_flight if id(d) not in finished]
            semaphore.pending.clear()

    def complete(self, dma: _Dma) -> None:
        dma.complete = True
        self.sems[dma.sem].arrived += dma.bytes
        self.schedule.append((self.now, dma.index))

    def complete_some(self) -> None:
        """Random mode: any DMA in flight may land at any moment."""
        self.moving = [d for d in self.moving if not d.complete]
        ready = [d for d in self.moving if self.rng.random() < 0.5]
        self.rng.shuffle(ready)
        for dma in ready:
            self.complete(dma)

    def finish(self) -> None:
        if not self.in_flight:
            return
        first = self.in_flight[0]
        notes = [
            Note(
                f"DMA of {d.bytes} bytes on semaphore {self.stream.sem_name(d.sem)} "
                "started here",
                self.stream.origin(d.index).loc,
            )
            for d in self.in_flight
        ]
        for sem, semaphore in sorted(self.sems.items()):
            if semaphore.started != semaphore.consumed:
                notes.append(
                    Note(
                        f"semaphore {self.stream.sem_name(sem)} ends at "
                        f"{semaphore.started - semaphore.consumed} bytes, not zero"
                    )
                )
        raise self.fail(
            first.index,
            errors.RUN_LEFTOVERS.format(count=len(self.in_flight)),
            tuple(notes),
        )


# -- executing ------------------------------------------------------------------


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
        stream.validate()
        self.stream = stream
        self.params = {b.name: i for i, b in enumerate(stream.buffers) if b.param}
        provided = frozenset(provided)
        check_names(stream, provided)
        compiler = _Compiler(stream, provided, mode, seed)
        compiler.run()
        self.provided = provided
        self.completions: list[tuple[int, int]] = compiler.schedule
        """When each DMA moved its data: (instruction being executed, the
        DMA's start instruction), in order."""
        self._aliased = {
            i
            for name, i in self.params.items()
            if name in provided and not compiler.writes[i]
        }
        self._poison = [w.unwritten_flat() for w in compiler.written]
        sizes = {}
        for i, buffer in enumerate(stream.buffers):
            if i not in self._aliased:
                sizes[buffer.space] = max(
                    sizes.get(buffer.space, 0), buffer.address + buffer.nbytes
                )
        self.arenas = {space: _arena(space, size) for space, size in sizes.items()}
        self._views: dict[int, np.ndarray] = {
            i: self._arena_view(buffer)
            for i, buffer in enumerate(stream.buffers)
            if i not in self._aliased
        }
        self._actions = self._prepare(compiler)

    def _arena_view(self, buffer: Buffer) -> np.ndarray:
        data = self.arenas[buffer.space][
            buffer.address : buffer.address + buffer.nbytes
        ]
        return data.view(BY_NAME[buffer.dtype].numpy).reshape(buffer.shape)

    def _prepare(self, compiler: _Compiler) -> list:
        """One (src, dst, add) per data move, in completion order; a source in
        an aliased input is None here and bound by each run."""
        actions = []
        for _, index in self.completions:
            dma = compiler.dmas[index]
            src = None if dma.src.buffer in self._aliased else self._end(dma.src)
            actions.append((dma.src, src, self._end(dma.dst), dma.add))
        return actions

    def _end(self, box: Box, base: np.ndarray | None = None) -> np.ndarray:
        """A numpy view of one DMA end, from its buffer's array."""
        base = self._views[box.buffer] if base is None else base
        if box.slices is None:
            return _strided(base.reshape(-1), box)
        view = base[(*box.slices, ...)]  # `...` keeps a 0-d result a view
        return view if view.shape == box.shape else view.reshape(box.shape)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Bind the inputs, execute, and return every parameter's final value."""
        check_inputs(self.stream, inputs)
        if frozenset(inputs) != self.provided:
            raise CopyIRError(
                f"This stream was compiled for inputs {sorted(self.provided)}, "
                f"not {sorted(inputs)}"
            )
        aliases = self._bind(inputs)
        self._fill_poison()
        self._bound = [
            (self._end(box, aliases[box.buffer]) if src is None else src, dst, add)
            for box, src, dst, add in self._actions
        ]
        self.execute()
        return {
            name: aliases[i] if i in self._aliased else self._views[i]
            for name, i in self.params.items()
        }

    def buffer(self, name: str) -> np.ndarray:
        """Any buffer's contents, scratch included (for inspection)."""
        for i, buffer in enumerate(self.stream.buffers):
            if buffer.name == name and i in self._views:
                return self._views[i]
        raise KeyError(name)

    def execute(self) -> None:
        """Move the data, in completion order, with the last run's inputs.

        `run` calls it; calling it again re-executes on memory as it is (what
        the benchmarks time: the compiled stream alone).
        """
        copyto, add_to = np.copyto, np.add
        for src, dst, add in self._bound:
            if add:
                add_to(dst, src, out=dst)
            else:
                copyto(dst, src)

    def _bind(self, inputs: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
        aliases = {}
        for name, value in inputs.items():
            i = self.params[name]
            array = as_input(value, BY_NAME[self.stream.buffers[i].dtype].numpy)
            if i in self._aliased:
                view = array.view()
                view.flags.writeable = False
                aliases[i] = view
            else:
                np.copyto(self._views[i], array)
        return aliases

    def _fill_poison(self) -> None:
        for i, unwritten in enumerate(self._poison):
            if i in self._aliased:
                continue
            view = self._views[i]
            raw = view.reshape(-1).view(np.uint8).reshape(view.size, view.itemsize)
            if unwritten is None:
                raw[...] = POISON
            elif unwritten.any():
                raw[unwritten] = POISON


def compile_stream(
    stream: Stream,
    provided: frozenset[str] | set[str] = frozenset(),
    mode: str = "random",
    seed: int = 0,
) -> Executable:
    """Check and compile a stream; see `Executable`."""
    return Executable(stream, provided, mode, seed)


def as_input(array: np.ndarray, want: np.dtype) -> np.ndarray:
    """The array as the parameter's dtype when it only lost its name.

    `.npy` files keep bfloat16 data as raw 2-byte records (`V2`); read back,
    those are the same bytes, so they are taken as bfloat16.
    """
    array = np.asarray(array)
    raw = array.dtype.kind == "V" and not array.dtype.names
    if array.dtype != want and raw and array.dtype.itemsize == want.itemsize:
        return array.view(want)
    return array


def _arena(space: str, size: int) -> np.ndarray:
    try:
        return np.empty(size, np.uint8)
    except (MemoryError, ValueError) as err:  # the machine cannot hold it
        raise CopyIRError(
            errors.CANNOT_ALLOCATE.format(size=size, space=space, why=err)
        ) from None


def check_names(stream: Stream, names) -> None:
    """Each input name is a parameter's."""
    params = [b.name for b in stream.buffers if b.param]
    for name in names:
        if name not in params:
            raise CopyIRError(
                errors.RUN_UNKNOWN_INPUT.format(
                    name=name, kernel=stream.kernel, params=", ".join(params)
                )
            )


def check_inputs(stream: Stream, inputs: Mapping[str, np.ndarray]) -> None:
    """Each input names a parameter and has its shape and dtype."""
    check_names(stream, inputs)
    params = {b.name: b for b in stream.buffers if b.param}
    for name, value in inputs.items():
        buffer = params[name]
        array = as_input(value, BY_NAME[buffer.dtype].numpy)
        if array.dtype != BY_NAME[buffer.dtype].numpy or array.shape != buffer.shape:
            raise CopyIRError(
                errors.RUN_INPUT_MISMATCH.format(
                    name=name,
                    got=f"{array.dtype.name}{list(array.shape)}",
                    want=f"{buffer.dtype}{list(buffer.shape)}",
                )
            )


def fill_inputs(
    stream: Stream, inputs: Mapping[str, np.ndarray], fill: str, seed: int = 0
) -> dict[str, np.ndarray]:
    """The inputs, plus every other parameter bound to zeros, to 0, 1, 2, ...
    (cast to its dtype), or to random values."""
    rng = np.random.default_rng(seed)
    filled = dict(inputs)
    for buffer in stream.buffers:
        if not buffer.param or buffer.name in filled:
            continue
        dtype = BY_NAME[buffer.dtype].numpy
        count = buffer.nbytes // dtype.itemsize
        try:
            if fill == "zeros":
                values = np.zeros(count, dtype)
            elif fill == "iota":
                values = np.arange(count).astype(dtype)
            else:
                values = rng.integers(0, 100, count).astype(dtype)
        except (MemoryError, ValueError) as err:  # the machine cannot hold it
            raise CopyIRError(
                errors.CANNOT_ALLOCATE_INPUT.format(
                    size=buffer.nbytes, name=buffer.name, why=err
                )
            ) from None
        filled[buffer.name] = values.reshape(buffer.shape)
    return filled


def run_stream(
    stream: Stream,
    inputs: Mapping[str, np.ndarray],
    mode: str = "random",
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Check the inputs, compile for them, and run once."""
    check_inputs(stream, inputs)
    return Executable(stream, frozenset(inputs), mode, seed).run(inputs)


__all__ = ["MODES", "POISON", "Executable", "Origin", "compile_stream", "run_stream"]
