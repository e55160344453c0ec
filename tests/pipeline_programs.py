"""Generated pipelines and an independent model of Pallas' schedule.

`pipelines()` is a hypothesis strategy of valid `copy.pipeline` programs
(MLIR form): grids of rank 1 to 3, a parallel prefix, one or two inputs
whose index maps pick grid dimensions or constants in any order (so blocks
may stay put, move with an outer dimension only, or be transposed), one or
two outputs that follow a prefix of the grid (accumulators that stay put
over the inner dimensions), input buffer counts 1 to 3, output counts 1 or
2, trivially windowed operands (the whole array is one block), and
`no_pipelining`.

`pallas_schedule()` walks the grid step by step, as Pallas' scheduler
does, keeping each operand's slot as a counter that advances when its block
changes; it shares no code with copyir's closed forms (`copyir.pipelines`)
or with the lowering, and writes each event as `copyir run --trace` does.
`expected_outputs()` is what the body leaves in each output: the value its
last visit wrote.

Classes of input covered: blocks that change at every step, with an outer
dimension only, or never; transposed maps; revisits of input blocks (an
input ignoring an outer dimension is fetched again); accumulating outputs;
one buffer (fetch and wait in the same step; a synchronous write-back);
prefetch distances 1 and 2; parallel prefixes (one schedule per parallel
point); trivial windows; grids with extent-1 dimensions; the pipeline
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
    sems_name: str = ""

    @property
    def window(self) -> str:
        return self.window_name or f"{self.name}_window"

    @property
    def sems(self) -> str:
        return self.sems_name or f"{self.name}_sems"

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

    @property
    def classes(self) -> set[str]:
        """The classes of input this pipeline belongs to, for coverage."""
        found = set()
        if self.copies > 1:
            found.add("pipelines sharing inputs")
        if self.clash:
            found.add("made name clashing with a user name")
        if self.parallel:
            found.add("parallel prefix")
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
                sems_name=f"{s.name}_sems{suffix(copy)}",
            )
            for s in self.specs
        )
        return dataclasses.replace(self, specs=specs, copies=1, clash=False)

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
            specs.append(
                f"{'out' if s.output else 'in'} %{s.name} : {ref(s.shape)} "
                f"block [{block}] index affine_map<({dims}) -> ({results})> "
                f"buffers {s.buffers}"
            )
        windows = ", ".join(f"%{s.name}w" for s in self.specs)
        indices = ", ".join(f"%{NAMES[d]}" for d in range(len(self.grid)))
        first = self.inputs[0]
        body = "\n".join(
            f"    copy.compute %{s.name}w (%{first.name}w) : "
            f"{window(first)}, {window(s)} "
            + compute_region(f"(add $0 {k + 1}.0)", "f32", 1)
            for k, s in enumerate(self.outputs)
        )
        semantics = ["parallel"] * self.parallel
        semantics += ["arbitrary"] * (len(self.grid) - self.parallel)
        options = (
            f" dimension_semantics [{', '.join(semantics)}]" * bool(self.parallel)
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
    events: list[str] = []
    for s in p.inputs:
        if s.trivial:
            events += _sync_in(s, None, "")
    for outer in itertools.product(*map(range, p.grid[: p.parallel])):
        inner = itertools.product(*map(range, p.grid[p.parallel :]))
        points = [outer + q for q in inner]
        events += _one_schedule(p, points, _iteration(outer))
    for s in p.outputs:
        if s.trivial:
            events += _sync_out(s, None, "")
    return events


def _one_schedule(p: Pipeline, points, outer: str) -> list[str]:
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
            slots.append(count % (1 if p.no_pipelining else s.buffers))
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

    inputs = [s for s in active if not s.output]
    outputs = [s for s in active if s.output]
    if not p.no_pipelining:
        for s in inputs:
            for t in range(min(s.buffers - 1, n)):
                if changed[s.name][t]:
                    fetch(s, t, outer)
    for t in range(n):
        here = _iteration(points[t])
        if p.no_pipelining:
            for s in inputs:
                for line in _sync_in(s, points[t], here, slot=0):
                    events.append(line)
        else:
            for s in inputs:
                ahead = t + s.buffers - 1
                if ahead < n and changed[s.name][ahead]:
                    fetch(s, ahead, here)
            for s in inputs:
                if changed[s.name][t]:
                    at(here, f"wait {s.sems}[{slot[s.name][t]}] 4096")
        for s in outputs:
            if changed[s.name][t]:
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
                if s.buffers == 1:
                    events += _sync_out(s, points[t], here, slot=k)
                else:
                    at(
                        here,
                        f"start {_window(s, k)} -> {s.name}[{s.region(points[t])}] "
                        f"on {s.sems}[{k}]",
                    )
        for s in outputs:
            if s.buffers == 2 and changed[s.name][t] and t > 0:
                at(here, f"wait {s.sems}[{slot[s.name][t - 1]}] 4096")
    if not p.no_pipelining:
        for s in outputs:
            if s.buffers == 2:
                at(outer, f"wait {s.sems}[{slot[s.name][n - 1]}] 4096")
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
    visit's body wrote (output k: the first input's block plus k + 1)."""
    result = {name: array.copy() for name, array in inputs.items()}
    first = p.inputs[0]
    for point in itertools.product(*map(range, p.grid)):
        source = inputs[first.name][_slices(first, point)]
        for k, s in enumerate(p.outputs):
            result[s.name][_slices(s, point)] = source + np.float32(k + 1)
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
    specs = []
    for n in range(draw(st.integers(1, 2))):
        results = draw(
            st.lists(
                st.one_of(st.none(), st.integers(0, rank - 1)), min_size=2, max_size=2
            ).filter(lambda r: r[0] is None or r[0] != r[1])
        )
        buffers = draw(st.integers(1, 3))
        specs.append(Spec(f"x{n}", False, tuple(results), buffers, grid))
    # Outputs follow a prefix of the grid (no revisit); the parallel
    # dimensions are a prefix that every output follows.
    prefixes = []
    for _ in range(draw(st.integers(1, 2))):
        prefixes.append(draw(st.integers(0, min(rank, 2))))
    parallel = draw(st.integers(0, min(prefixes)))
    for n, used in enumerate(prefixes):
        dims = list(range(used)) + [None] * (2 - used)
        results = tuple(draw(st.permutations(dims)))
        buffers = draw(st.integers(1, 2))
        specs.append(Spec(f"y{n}", True, results, buffers, grid))
    copies = draw(st.sampled_from([1, 1, 1, 2]))
    clash = draw(st.integers(0, 3)) == 0
    return Pipeline(grid, parallel, tuple(specs), no_pipelining, copies, clash)
