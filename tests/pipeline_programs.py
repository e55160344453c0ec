"""Generated pipelines and an independent model of Pallas' schedule.

`pipelines()` is a hypothesis strategy of valid `copy.pipeline` programs
(MLIR form): grids of rank 1 to 3, parallel dimensions (a prefix for the
kernel grid's flavour, anywhere for emit_pipeline's, split over 2 or 3
cores or not), one to three inputs whose index maps pick grid dimensions
or constants in any order (so blocks may stay put, move with an outer
dimension only, or be transposed), one or two outputs that follow a
prefix of the grid (accumulators that stay put over the inner
dimensions), some of them `inout` (emit_pipeline's only: fetched, added
to, written back; in and out counts 1 to 3), input buffer counts 1 to 4
(with lookahead or not: Pallas' `fetch_with_lookahead` walk, modelled
as it runs),
output counts 1 to 3 (1 or 2 on a kernel grid), trivially windowed operands (the whole array is one
block), and `no_pipelining`.

`pallas_schedule()` walks the grid step by step, as Pallas' scheduler
(`jax/_src/pallas/mosaic/pipeline.py` of JAX 0.12: `Scheduler`,
`_partition_grid`, `_emit_pipeline`) does, keeping each operand's slot as
a counter that advances when its block changes: the prologue step-major
over the inputs, each output copy waited `buffers - 1` steps after it
starts, the epilogue's waits oldest first. It shares no code with
copyir's closed forms (`copyir.pipelines`) or with the lowering, and
writes each event as `copyir run --trace` does.
`expected_outputs()` is what the body leaves in each output: the value its
last visit wrote.

Classes of input covered: blocks that change at every step, with an outer
dimension only, or never; transposed maps; revisits of input blocks (an
input ignoring an outer dimension is fetched again); accumulating outputs;
one buffer (fetch and wait in the same step; a synchronous write-back);
prefetch distances 1 to 3 (a prologue interleaving inputs of different
counts); write-back lags 1 and 2; kernel-grid parallel prefixes (one
schedule per parallel point); emit_pipeline ignoring parallel dimensions,
or split over cores evenly or not (cores with one step more, cores with
none); trivial windows; grids with extent-1 dimensions; the pipeline
written twice in one kernel over the same inputs and outputs, and a user
scratch buffer named as the first input's window would be (the lowering's
names are fresh: `x0_window_1`, ...; `Pipeline.classes` says which of
these a pipeline is). Not covered here:
ragged edges and `Element` or squeezed blocks (see tests/passes/test_expand_pipelines.py's
examples), index maps with arithmetic.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from copyir.testing import compute_region

BLOCK = (8, 128)
NAMES = ("i", "j", "k")


@dataclass(frozen=True)
class Spec:
    name: str
    output: bool
    results: tuple[int | None, ...]
    """Per array dimension, the grid dimension it follows (None: block 0)."""
    buffers: int
    grid: tuple[int, ...]
    window_name: str = ""
    """The window buffer's name in the stream (a fresh name: see
    `Pipeline.named`); `x0_window` by default."""
    suffix: str = ""
    """Of its semaphores' names (`Pipeline.named`)."""
    out_buffers: int = 0
    """An `inout`'s output count (its input count is `buffers`)."""
    lookahead: bool = False
    """An input with `pl.Buffered(buffers, use_lookahead=True)`."""

    @property
    def inout(self) -> bool:
        return self.out_buffers > 0

    @property
    def fetched(self) -> int:
        """The input buffer count; 0 for an output."""
        return self.buffers if not self.output or self.inout else 0

    @property
    def written(self) -> int:
        """The output buffer count; 0 for an input."""
        return self.out_buffers if self.inout else self.buffers * self.output

    @property
    def slots(self) -> int:
        """The window's slots (Pallas' `_total_buffer_count`)."""
        return self.fetched + self.written - self.inout

    @property
    def window(self) -> str:
        return self.window_name or f"{self.name}_window"

    @property
    def sems(self) -> str:
        """Its fetches' semaphores (an output's: its write-backs')."""
        return f"{self.name}_{'in_' * self.inout}sems{self.suffix}"

    @property
    def out_sems(self) -> str:
        return f"{self.name}_{'out_' * self.inout}sems{self.suffix}"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(
            b if d is None else self.grid[d] * b
            for d, b in zip(self.results, BLOCK, strict=True)
        )

    @property
    def trivial(self) -> bool:
        """The whole array is one block: copied once, not pipelined."""
        return self.shape == BLOCK

    def block(self, point: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(0 if d is None else point[d] for d in self.results)

    def region(self, point: tuple[int, ...]) -> str:
        return ", ".join(
            f"{i * b}:{(i + 1) * b}"
            for i, b in zip(self.block(point), BLOCK, strict=True)
        )


@dataclass(frozen=True)
class Pipeline:
    grid: tuple[int, ...]
    parallel: int
    specs: tuple[Spec, ...]
    no_pipelining: bool = False
    copies: int = 1
    """The pipeline written this many times in the kernel, over the same
    inputs and outputs (each copy's windows get fresh names)."""
    clash: bool = False
    """A user scratch buffer named as the first input's window would be."""
    kernel_grid: bool = True
    """The pallas_call grid's flavour; else emit_pipeline's."""
    semantics: tuple[bool, ...] = ()
    """Per grid dimension, whether it is parallel (emit_pipeline's flavour;
    the kernel grid's are its `parallel` prefix)."""
    cores: int | None = None

    @property
    def classes(self) -> set[str]:
        """The classes of input this pipeline belongs to, for coverage."""
        found = set()
        if self.copies > 1:
            found.add("pipelines sharing inputs")
        if self.clash:
            found.add("made name clashing with a user name")
        if self.parallel and self.kernel_grid:
            found.add("parallel prefix")
        if not self.kernel_grid:
            found.add("cores" if self.cores else "emit_pipeline")
        return found

    def named(self, copy: int) -> Pipeline:
        """The pipeline's `copy`-th instance, its windows and semaphores
        named as the lowering names them: `x0_window`, then `x0_window_1`,
        ..., past any name the user took."""
        taken = 1 if self.clash else 0

        def suffix(n: int) -> str:
            return f"_{n}" if n else ""

        specs = tuple(
            dataclasses.replace(
                s,
                window_name=f"{s.name}_window"
                + suffix(copy + (taken if s is self.inputs[0] else 0)),
                suffix=suffix(copy),
            )
            for s in self.specs
        )
        return dataclasses.replace(self, specs=specs, copies=1, clash=False)

    @property
    def parallels(self) -> tuple[bool, ...]:
        if self.kernel_grid:
            return tuple(d < self.parallel for d in range(len(self.grid)))
        return self.semantics or (False,) * len(self.grid)

    @property
    def inputs(self) -> list[Spec]:
        return [s for s in self.specs if not s.output]

    @property
    def outputs(self) -> list[Spec]:
        return [s for s in self.specs if s.output]

    def mlir(self) -> str:
        dims = ", ".join(f"d{d}" for d in range(len(self.grid)))
        params = ", ".join(f"%{s.name}: {ref(s.shape)}" for s in self.specs)
        specs = []
        for s in self.specs:
            results = ", ".join("0" if d is None else f"d{d}" for d in s.results)
            block = ", ".join(map(str, BLOCK))
            direction = "inout" if s.inout else "out" if s.output else "in"
            counts = f"[{s.buffers}, {s.out_buffers}]" if s.inout else s.buffers
            specs.append(
                f"{direction} %{s.name} : {ref(s.shape)} "
                f"block [{block}] index affine_map<({dims}) -> ({results})> "
                f"buffers {counts}" + " lookahead" * s.lookahead
            )
        windows = ", ".join(f"%{s.name}w" for s in self.specs)
        indices = ", ".join(f"%{NAMES[d]}" for d in range(len(self.grid)))
        first = self.inputs[0]
        lines = []
        for k, s in enumerate(self.outputs):
            if s.inout:  # it accumulates the first input's blocks
                lines.append(
                    f"    copy.compute %{s.name}w (%{s.name}w, %{first.name}w) : "
                    f"{window(s)}, {window(s)}, {window(first)} "
                    + compute_region("(add $0 $1)", "f32", 2)
                )
            else:
                lines.append(
                    f"    copy.compute %{s.name}w (%{first.name}w) : "
                    f"{window(first)}, {window(s)} "
                    + compute_region(f"(add $0 {k + 1}.0)", "f32", 1)
                )
        body = "\n".join(lines)
        words = ["parallel" if p else "arbitrary" for p in self.parallels]
        options = (
            " kernel_grid" * self.kernel_grid
            + f" dimension_semantics [{', '.join(words)}]" * any(self.parallels)
            + f" cores {self.cores}" * bool(self.cores)
            + " no_pipelining" * self.no_pipelining
        )
        grid = ", ".join(map(str, self.grid))
        scratch = ""
        if self.clash:
            scratch = f"  %{first.window} = copy.alloc : {window(first)}\n"
        pipeline = (
            f"  copy.pipeline grid({grid}){options} {', '.join(specs)} "
            f"({windows}, {indices}) {{\n{body}\n  }}\n"
        )
        return (
            f"copy.kernel @generated({params}) {{\n{scratch}"
            f"{pipeline * self.copies}}}\n"
        )


def ref(shape) -> str:
    return f"!copy.ref<{'x'.join(map(str, shape))}xf32, hbm>"


def window(spec: Spec) -> str:
    return f"!copy.ref<{'x'.join(map(str, BLOCK))}xf32, vmem>"


# -- the model ------------------------------------------------------------------


def _iteration(point: tuple[int, ...]) -> str:
    return ", ".join(f"{NAMES[d]} = {v}" for d, v in enumerate(point))


def pallas_schedule(p: Pipeline) -> list[str]:
    """Every event, as `copyir run --trace` prints it (a synchronous copy's
    internal semaphore written `sync`), each copy of the pipeline in turn."""
    if p.copies > 1 or p.clash:
        return [line for c in range(p.copies) for line in pallas_schedule(p.named(c))]
    every = list(itertools.product(*map(range, p.grid)))
    if p.cores:
        events = []
        for core, points in enumerate(_partition(p)):
            if not points:
                continue  # a core with no step runs no pipeline
            local = _local_indices(points)
            names = [f"core = {core}, {_iteration(q)}" for q in local]
            events += _trivial_in(p, f"core = {core}")
            events += _one_schedule(p, points, f"core = {core}", names)
            events += _trivial_out(p, f"core = {core}")
        return events
    events = _trivial_in(p, "")
    if not p.kernel_grid or not p.parallel:
        events += _one_schedule(p, every, "", [_iteration(q) for q in every])
    else:
        for outer in itertools.product(*map(range, p.grid[: p.parallel])):
            points = [q for q in every if q[: p.parallel] == outer]
            names = [_iteration(q) for q in points]
            events += _one_schedule(p, points, _iteration(outer), names)
    return events + _trivial_out(p, "")


def _trivial_in(p: Pipeline, prefix: str) -> list[str]:
    """A trivially windowed output's window marked unwritten (the body may
    write part of it), then the trivially windowed inputs copied in."""
    written = [s for s in p.specs if s.trivial and not s.fetched]
    lines = [f"invalidate {_window(s, 0)} stale" for s in written]
    fetched = [s for s in p.specs if s.fetched and s.trivial]
    lines = [f"{prefix}: {line}" if prefix else line for line in lines]
    return lines + [e for s in fetched for e in _sync_in(s, None, prefix)]


def _trivial_out(p: Pipeline, prefix: str) -> list[str]:
    return [e for s in p.outputs if s.trivial for e in _sync_out(s, None, prefix)]


def _partition(p: Pipeline) -> list[list[tuple[int, ...]]]:
    """Each core's grid points, as Pallas' `_partition_grid` shares them: the
    first parallel dimension the core count divides, else the largest one
    (the first of equals), its first `extent % cores` cores one step more."""
    cores = p.cores or 1
    parallel = [d for d, par in enumerate(p.parallels) if par]
    divisible = [d for d in parallel if p.grid[d] % cores == 0]
    dim = divisible[0] if divisible else max(parallel, key=lambda d: (p.grid[d], -d))
    base, rest = divmod(p.grid[dim], cores)
    shares = []
    start = 0
    for core in range(cores):
        size = base + (core < rest)
        extents = [range(n) for n in p.grid]
        extents[dim] = range(start, start + size)
        shares.append(list(itertools.product(*extents)))
        start += size
    return shares


def _local_indices(points) -> list[tuple[int, ...]]:
    """A core's points as its loop counts them: from 0 in its share."""
    low = [min(q[d] for q in points) for d in range(len(points[0]))]
    return [tuple(v - lo for v, lo in zip(q, low, strict=True)) for q in points]


def _one_schedule(p: Pipeline, points, outer: str, names: list[str]) -> list[str]:
    active = [s for s in p.specs if not s.trivial]
    n = len(points)
    changed = {
        s.name: [
            t == 0 or s.block(points[t]) != s.block(points[t - 1]) for t in range(n)
        ]
        for s in active
    }
    slot = {}
    for s in active:  # the counter of changes, as Pallas' slots advance
        count, slots = -1, []
        for t in range(n):
            count += changed[s.name][t]
            slots.append(count % (1 if p.no_pipelining else s.slots))
        slot[s.name] = slots
    events: list[str] = []

    def at(prefix: str, text: str) -> None:
        events.append(f"{prefix}: {text}" if prefix else text)

    def fetch(s: Spec, t: int, prefix: str) -> None:
        k = slot[s.name][t]
        at(
            prefix,
            f"start {s.name}[{s.region(points[t])}] -> {_window(s, k)} "
            f"on {s.sems}[{k}]",
        )

    inputs = [s for s in active if s.fetched]
    outputs = [s for s in active if s.written]
    # Lookahead inputs as `fetch_with_lookahead` walks: the fetches issued,
    # the blocks done with, and the last point the walk compared.
    look = {s.name: [0, 0, 0] for s in inputs if s.lookahead}

    def walk(s: Spec, limit: int, prefix: str) -> None:
        state = look[s.name]
        current, following = state[2], state[2] + 1
        while state[0] < limit and following < n:
            if s.block(points[following]) != s.block(points[current]):
                k = state[0] % s.slots
                at(
                    prefix,
                    f"start {s.name}[{s.region(points[following])}] -> "
                    f"{_window(s, k)} on {s.sems}[{k}]",
                )
                state[0] += 1
            current, following = following, following + 1
        state[2] = current

    if not p.no_pipelining:  # the prologue, step-major
        for t in range(min(max((s.fetched for s in inputs), default=1) - 1, n)):
            for s in inputs:
                if t >= s.fetched - 1:
                    continue
                if s.lookahead and t == 0:
                    fetch(s, 0, outer)
                    look[s.name][0] = 1
                elif s.lookahead:
                    state = look[s.name]
                    walk(s, min(state[1] + s.fetched, state[0] + 1), outer)
                elif changed[s.name][t]:
                    fetch(s, t, outer)
    for t in range(n):
        here = names[t]
        if p.no_pipelining:
            for s in inputs:
                for line in _sync_in(s, points[t], here, slot=0):
                    events.append(line)
        else:
            for s in inputs:
                ahead = t + s.fetched - 1
                if s.lookahead:
                    walk(s, look[s.name][1] + s.fetched, here)
                elif ahead < n and changed[s.name][ahead]:
                    fetch(s, ahead, here)
            for s in inputs:
                if changed[s.name][t]:
                    at(here, f"wait {s.sems}[{slot[s.name][t]}] 4096")
        for s in outputs:
            if changed[s.name][t] and not s.inout:
                at(here, f"invalidate {_window(s, slot[s.name][t])} stale")
        for s in p.outputs:
            k = 0 if s.trivial else slot[s.name][t]
            at(here, f"compute {_window(s, k)}")
        if p.no_pipelining:
            for s in outputs:
                events += _sync_out(s, points[t], here, slot=0)
            continue
        for s in outputs:
            if t == n - 1 or changed[s.name][t + 1]:
                k = slot[s.name][t]
                if s.written == 1 and s.inout:  # `copy_out` waits it at once,
                    at(  # on its own `sem_sends[slot]`
                        here,
                        f"start {_window(s, k)} -> {s.name}[{s.region(points[t])}] "
                        f"on {s.out_sems}[{k}]",
                    )
                    at(here, f"wait {s.out_sems}[{k}] 4096")
                elif s.written == 1:
                    events += _sync_out(s, points[t], here, slot=k)
                else:
                    at(
                        here,
                        f"start {_window(s, k)} -> {s.name}[{s.region(points[t])}] "
                        f"on {s.out_sems}[{k}]",
                    )
        for s in inputs:  # `advance_slots`: the block is done with
            if s.lookahead and (t == n - 1 or changed[s.name][t + 1]):
                look[s.name][1] += 1
        for s in outputs:  # the copy `buffers - 1` steps back
            lag = s.written - 1
            if lag and t >= lag and changed[s.name][t - lag + 1]:
                at(here, f"wait {s.out_sems}[{slot[s.name][t - lag]}] 4096")
    if not p.no_pipelining:  # the epilogue: the oldest copies first
        lags = max((s.written - 1 for s in outputs), default=0)
        for lag in range(lags - 1, -1, -1):
            for s in outputs:
                if lag >= s.written - 1 or lag >= n:
                    continue
                if lag == 0 or changed[s.name][n - lag]:
                    k = slot[s.name][n - 1 - lag]
                    at(outer, f"wait {s.out_sems}[{k}] 4096")
    return events


def _window(s: Spec, k: int) -> str:
    return f"{s.window}[{k}:{k + 1}, " + ", ".join(f"0:{n}" for n in BLOCK) + "]"


def _sync_in(s: Spec, point, prefix: str, slot: int = 0) -> list[str]:
    where = s.region(point or (0,) * len(s.grid))
    lines = [f"start {s.name}[{where}] -> {_window(s, slot)} on sync", "wait sync"]
    return [f"{prefix}: {line}" if prefix else line for line in lines]


def _sync_out(s: Spec, point, prefix: str, slot: int = 0) -> list[str]:
    where = s.region(point or (0,) * len(s.grid))
    lines = [f"start {_window(s, slot)} -> {s.name}[{where}] on sync", "wait sync"]
    return [f"{prefix}: {line}" if prefix else line for line in lines]


def expected_outputs(
    p: Pipeline, inputs: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The outputs' final values: each visited block holds what its last
    visit's body wrote (output k: the first input's block plus k + 1; an
    `inout`: its own block plus the first input's, at every visit)."""
    result = {name: array.copy() for name, array in inputs.items()}
    first = p.inputs[0]
    points = list(itertools.product(*map(range, p.grid)))
    for point in points * p.copies:  # each copy of the pipeline adds again
        source = inputs[first.name][_slices(first, point)]
        for k, s in enumerate(p.outputs):
            block = _slices(s, point)
            if s.inout:
                result[s.name][block] += source
            else:
                result[s.name][block] = source + np.float32(k + 1)
    return result


def _slices(s: Spec, point) -> tuple[slice, ...]:
    return tuple(
        slice(i * b, (i + 1) * b) for i, b in zip(s.block(point), BLOCK, strict=True)
    )


# -- the generator ----------------------------------------------------------------


@st.composite
def pipelines(draw) -> Pipeline:
    rank = draw(st.integers(1, 3))
    grid = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    no_pipelining = draw(st.integers(0, 9)) == 0
    kernel_grid = draw(st.booleans())
    specs = []
    for n in range(draw(st.integers(1, 3))):
        results = draw(
            st.lists(
                st.one_of(st.none(), st.integers(0, rank - 1)), min_size=2, max_size=2
            ).filter(lambda r: r[0] is None or r[0] != r[1])
        )
        buffers = draw(st.integers(1, 4))
        lookahead = buffers > 1 and draw(st.booleans())
        specs.append(
            Spec(f"x{n}", False, tuple(results), buffers, grid, lookahead=lookahead)
        )
    # Outputs follow a prefix of the grid (no revisit); the parallel
    # dimensions are among those every output follows (a prefix on a
    # kernel grid), so no two cores write one block.
    prefixes = []
    for _ in range(draw(st.integers(1, 2))):
        prefixes.append(draw(st.integers(0, min(rank, 2))))
    parallel = draw(st.integers(0, min(prefixes)))
    for n, used in enumerate(prefixes):
        dims = list(range(used)) + [None] * (2 - used)
        results = tuple(draw(st.permutations(dims)))
        buffers = draw(st.integers(1, 2 if kernel_grid else 3))
        out_buffers = (
            0 if kernel_grid or draw(st.booleans()) else draw(st.integers(1, 3))
        )
        specs.append(Spec(f"y{n}", True, results, buffers, grid, "", "", out_buffers))
    copies = draw(st.sampled_from([1, 1, 1, 2]))
    clash = draw(st.integers(0, 3)) == 0
    semantics: tuple[bool, ...] = ()
    cores = None
    if not kernel_grid:
        semantics = tuple(
            d < min(prefixes) and draw(st.booleans()) for d in range(rank)
        )
        if any(semantics) and draw(st.booleans()):
            cores = draw(st.integers(2, 3))
        parallel = 0
    return Pipeline(
        grid,
        parallel,
        tuple(specs),
        no_pipelining,
        copies,
        clash,
        kernel_grid,
        semantics,
        cores,
    )
