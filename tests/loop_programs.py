"""A hypothesis generator of race-free loop programs, for tests to import.

`loop_programs()` draws a `LoopProgram`: the text of one kernel in the
authoring syntax (`generated.cpy`), the shapes of the parameters to give as
inputs, the dtype, and numpy's expected final value of each output that no
computation writes. A program is a sequence of fragments;
each fragment has parameters, scratch and semaphores of its own, and waits
every DMA it starts before it ends, so fragments never race with each
other, and each one is race-free by construction under the protocol's
finishing rule (docs/protocol.md): a buffer slot is written again only
after the DMA that last read it was waited, nothing reads a region before a DMA or an input wrote it, and
every semaphore ends at zero.

Covered (each fragment is drawn with its variants):

- `ring`: a prefetching loop through k slots, `% 2` or `% 3` slot and
  semaphore indices, prefetch depth 1 or k - 1 under `when i + depth < N`
  (so fetches stay in flight across iterations), the prologue before the
  loop or under `when i == 0`, the wait as `copy_wait` / `dma wait` or
  through a descriptor made in the loop (`c.wait()`), and optionally a
  computation between the wait and the copy out;
- `windows`: a grid over a BufferedRef with ragged blocks (the last row
  and column of blocks shorter) through asynchronous window copies
  (`buffered_copy start` / `wait`) on a semaphore array, with or without
  prefetch of the next block in row-major order (`//` and `%` of the flat
  step, a named index value), its prologue before the loop or under
  `when i == 0 and j == 0`;
- `shared`: several DMAs on one semaphore and one larger wait, or one DMA
  waited by two smaller descriptors;
- `accumulate`: a sum over the last axis of a grid (or of nested loops)
  into an accumulator that stays in VMEM, `acc[...] = 0` under
  `when j == 0`, `acc += xw`, written back under `when j == last`;
- `add`: DMAs with `add` into a parameter given as input, under a loop
  marked `parallel=(0,)` sometimes, plus a second add under
  `when i % 2 == 0`;
- `parity`: nested loops whose body computes one of two expressions under
  `when (i + j) % 2 == 0` and its complement (`not`, an `or` of two
  `and`s, or `!=`);
- `descriptor`: a descriptor made before the loop and started in every
  iteration (`c.start()`), beside one made in each iteration;
- computations: random trees of `+ - * / max min` and unary minus over the
  window just read and literals (float literals for float dtypes, small
  integers otherwise, `/` only for floats), in f32, f16, bf16, i32 and i8
  (integers wrap);
- `guarded`: copies under kernel-level `when`s of constants and a named
  value, outside any loop, with a racy debug copy under the condition
  that never holds; one program in six is made of these alone, a kernel
  with no loop at all;
- `parallel`: grids marked `parallel=(0,)`, `(0, 1)` or `(1,)` whose
  iterations reuse VMEM scratch, each writing it before reading it;
- `wide`: indices and conditions near 64 bits whose values are small
  (`i % (2**63 - 1)`, `i // 2**62 + i`, `when i * c >= 0` past 2**63);
- loops as `range(N)`, `range(a, b)` with a nonzero start, grids, and
  nested `for`s; trip counts of 1 (a `when` that never holds).

`parallel_faults()` draws the contrary: parallel grids whose claim one
fault breaks (state carried in VMEM, by a computation or by a DMA that
adds; an HBM block every iteration writes; a DMA started in one iteration
and waited in another), each with the report known by construction.
`LoopProgram.classes` names the classes of input a program belongs to.

Not covered: `priority=1`; SMEM scratch and scalar computations; `Element`
and squeezed window dimensions in loops; `-=` and `*=`; pytree `sync_copy`
with several leaves inside loops; a write-behind (an output DMA waited in
a later iteration, or after the loop); one semaphore or buffer shared by
two fragments; NaN or infinite inputs
(computations may still make them, by division or overflow); bool, i16,
i64, u8 to u32 and f64 dtypes; trip counts above a few dozen; anything
racy or invalid (the generator makes only correct programs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import copyir
from copyir.dtypes import BY_NAME

DTYPES = ("f32", "f16", "bf16", "i32", "i8")
FLOAT_LITERALS = ("2.0", "0.5", "-1.5", "1e-3", "3.0")
INT_LITERALS = ("0", "1", "2", "3", "-2")
FRAGMENTS = (
    "ring",
    "windows",
    "shared",
    "accumulate",
    "add",
    "parity",
    "descriptor",
    "guarded",
    "parallel",
    "wide",
)


@dataclass(frozen=True)
class LoopProgram:
    """A generated program, and the parameters it reads (name -> shape)."""

    text: str
    inputs: dict[str, tuple[int, ...]]
    dtype: str
    fragments: tuple[str, ...]
    expectations: tuple[tuple[str, Expectation], ...] = ()
    filename: str = "generated.cpy"

    @property
    def classes(self) -> set[str]:
        """The classes of input this program belongs to, for coverage."""
        found = set()
        if all(f in LOOP_FREE for f in self.fragments):
            found.add("loop-free with a kernel-level when")
        if "parallel" in self.fragments:
            found.add("parallel grid")
        found.update(
            {
                "carried": {"parallel grid with carried state"},
                "add_carried": {"parallel grid with carried state"},
                "same_hbm": {"parallel grid writing HBM twice"},
                "cross_dma": {"parallel grid with a DMA across iterations"},
            }.get(self.fragments[0], set())
        )
        if "wide" in self.fragments:
            found.add("indices near 64 bits")
        return found

    def parse(self):
        return copyir.parse(self.text, filename=self.filename)

    def expected(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The final value of each output numpy can say directly (those no
        computation writes), unwritten parts poisoned (Pallas' interpret mode's values: NaN,
        the integer maximum, True)."""
        return {name: expect(inputs) for name, expect in self.expectations}

    def random_inputs(self, seed: int) -> dict[str, np.ndarray]:
        """Finite values for every input: normal floats, integers over their
        dtype's range (i8) or a few thousand either side of zero (i32)."""
        rng = np.random.default_rng(seed)
        numpy = BY_NAME[self.dtype].numpy
        arrays = {}
        for name, shape in self.inputs.items():
            if self.dtype.startswith("i"):
                bound = 127 if self.dtype == "i8" else 5000
                values = rng.integers(-bound, bound, shape, endpoint=True)
            else:
                values = rng.standard_normal(shape) * 4
            arrays[name] = values.astype(numpy)
        return arrays


@dataclass(frozen=True)
class Ref:
    """A ref, or a view of one, in the program being built: its text
    (`buf3`, `x0[ds(8 * i4, 8)]`), shape and memory space."""

    name: str
    shape: tuple[int, ...]
    space: str


Subscript = int | str | tuple[int | str, int]
"""An integer or index expression (an index: the dimension drops), or a
(start, size) slice whose start is either."""
Expectation = Callable[[Mapping[str, np.ndarray]], np.ndarray]


@dataclass
class Builder:
    """The statements of one kernel in the authoring syntax, fresh names."""

    dtype: str
    params: list[tuple[Ref, bool]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    expectations: list[tuple[str, Expectation]] = field(default_factory=list)
    depth: int = 1
    count: int = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{hint}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def type(self, shape: tuple[int, ...], space: str) -> str:
        return f"{self.dtype}[{', '.join(map(str, shape))}] @{space}"

    def param(self, hint: str, shape: tuple[int, ...], given: bool) -> Ref:
        """A kernel parameter; `given` ones are inputs."""
        ref = Ref(f"{hint}{len(self.params)}", shape, "hbm")
        self.params.append((ref, given))
        return ref

    def expect(self, ref: Ref, expectation: Expectation) -> None:
        """What numpy says the parameter `ref` ends as, from the inputs."""
        self.expectations.append((ref.name, expectation))

    def poison(self, shape: tuple[int, ...]) -> np.ndarray:
        numpy = BY_NAME[self.dtype].numpy
        if numpy == np.bool_:
            return np.full(shape, True)
        if np.issubdtype(numpy, np.integer):
            return np.full(shape, np.iinfo(numpy).max, numpy)
        return np.full(shape, np.nan, numpy)

    def alloc(self, shape: tuple[int, ...], space: str = "vmem") -> Ref:
        ref = Ref(self.fresh("buf"), shape, space)
        self.emit(f"{ref.name} = alloc {self.type(shape, space)}")
        return ref

    def semaphores(self, count: int | None = None) -> str:
        """A semaphore, or an array of `count` of them."""
        name = self.fresh("sem")
        self.emit(f"{name} = semaphore" + ("" if count is None else f"[{count}]"))
        return name

    def index(self, expr: str) -> str:
        """A named index value: `slot5 = i3 % 2`."""
        name = self.fresh("ix")
        self.emit(f"{name} = {expr}")
        return name

    def view(self, ref: Ref, subscripts: Sequence[Subscript]) -> Ref:
        texts, kept = [], []
        for sub in subscripts:
            if isinstance(sub, tuple):
                start, size = sub
                if isinstance(start, str):
                    texts.append(f"ds({start}, {size})")
                else:
                    texts.append(f"{start}:{start + size}")
                kept.append(size)
            else:
                texts.append(str(sub))
        shape = (*kept, *ref.shape[len(subscripts) :])
        return Ref(f"{ref.name}[{', '.join(texts)}]", shape, ref.space)

    def dma(self, action: str, src: Ref, dst: Ref, sem: str, add: bool = False) -> None:
        """`copy_start` / `copy_wait`, or the action form `dma start` when
        the program's count of names is odd."""
        form = f"dma {action}" if self.count % 2 else f"copy_{action}"
        self.emit(f"{form} {src.name} -> {dst.name}, {sem}" + (", add" if add else ""))

    def copy(self, src: Ref, dst: Ref, sem: str, add: bool = False) -> None:
        """A start and its wait."""
        self.dma("start", src, dst, sem, add)
        self.dma("wait", src, dst, sem)

    def sync_copy(self, src: Ref, dst: Ref) -> None:
        self.emit(f"sync_copy {src.name} -> {dst.name}")

    def descriptor(self, src: Ref, dst: Ref, sem: str) -> str:
        name = self.fresh("c")
        self.emit(f"{name} = async_copy {src.name} -> {dst.name}, {sem}")
        return name

    def async_dma(self, action: str, descriptor: str, add: bool = False) -> None:
        self.emit(f"{descriptor}.{action}({'add' if add else ''})")

    def compute(self, dst: Ref, expression: str) -> None:
        self.emit(f"{dst.name}[...] = {expression}")

    @contextlib.contextmanager
    def loop(self, extent: str, count: int, parallel: str = "") -> Iterator[list[str]]:
        """`for i3, j4 in grid(2, 3) {`; yields the index names."""
        names = [self.fresh(n) for n in "ijk"[:count]]
        self.emit(f"for {', '.join(names)} in {extent}{parallel} {{")
        self.depth += 1
        yield names
        self.depth -= 1
        self.emit("}")

    @contextlib.contextmanager
    def when(self, condition: str) -> Iterator[None]:
        self.emit(f"when {condition} {{")
        self.depth += 1
        yield
        self.depth -= 1
        self.emit("}")

    def text(self) -> str:
        params = ", ".join(
            f"{r.name}: {self.type(r.shape, 'hbm')}" for r, _ in self.params
        )
        body = "\n".join(self.lines)
        return f"kernel generated({params}) {{\n{body}\n}}\n"


# --------------------------------------------------------------------------
# Computations
# --------------------------------------------------------------------------


@st.composite
def expressions(draw, dtype: str, operands: Sequence[str], depth: int = 3) -> str:
    """An expression in the authoring syntax over the operands and literals."""
    floating = not dtype.startswith("i")
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if operands and draw(st.booleans()):
            return draw(st.sampled_from(list(operands)))
        literal = draw(st.sampled_from(FLOAT_LITERALS if floating else INT_LITERALS))
        return f"({literal})" if literal.startswith("-") else literal
    names = ["+", "-", "*", "max", "min", "neg"] + (["/"] if floating else [])
    operation = draw(st.sampled_from(names))
    if operation == "neg":
        return f"-({draw(expressions(dtype, operands, depth - 1))})"
    a, b = (draw(expressions(dtype, operands, depth - 1)) for _ in range(2))
    if operation in ("max", "min"):
        return f"{operation}({a}, {b})"
    return f"({a} {operation} {b})"


@st.composite
def computation(draw, b: Builder, dst: Ref, inputs: Sequence[Ref]) -> None:
    """dst = a random expression of the inputs (at least one of them)."""
    names = [r.name for r in inputs]
    expression = draw(expressions(b.dtype, names))
    if not any(name in expression for name in names):
        expression = f"{names[0]} + {expression}"
    b.compute(dst, expression)


# --------------------------------------------------------------------------
# Fragments
# --------------------------------------------------------------------------


@st.composite
def ring(draw, b: Builder) -> None:
    """A prefetching loop through k slots of (rows, cols) blocks."""
    k = draw(st.sampled_from([2, 3]))
    depth = draw(st.sampled_from(sorted({1, k - 1})))
    n = draw(st.integers(1, 6))
    rows, cols = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([3, 8, 16]))
    x = b.param("x", (n * rows, cols), True)
    y = b.param("y", (n * rows, cols), False)
    buf = b.alloc((k, rows, cols))
    sems, outs = b.semaphores(k), b.semaphores(k)
    out = b.alloc((rows, cols)) if draw(st.booleans()) else None
    in_loop = draw(st.booleans())

    def prologue() -> None:
        for p in range(min(depth, n)):
            b.dma(
                "start", b.view(x, [(p * rows, rows)]), b.view(buf, [p]), f"{sems}[{p}]"
            )

    if not in_loop:
        prologue()
    with b.loop(f"range({n})", 1) as (i,):
        if in_loop:
            with b.when(f"{i} == 0"):
                prologue()
        slot = b.index(f"{i} % {k}")
        with b.when(f"{i} + {depth} < {n}"):
            nslot = f"({i} + {depth}) % {k}"
            src = b.view(x, [(f"{rows} * ({i} + {depth})", rows)])
            b.dma("start", src, b.view(buf, [nslot]), f"{sems}[{nslot}]")
        row = b.index(f"{rows} * {i}")
        xv, window = b.view(x, [(row, rows)]), b.view(buf, [slot])
        if draw(st.booleans()):
            b.async_dma("wait", b.descriptor(xv, window, f"{sems}[{slot}]"))
        else:
            b.dma("wait", xv, window, f"{sems}[{slot}]")
        if out is not None:
            draw(computation(b, out, [window]))
            window = out
        b.copy(window, b.view(y, [(row, rows)]), f"{outs}[{slot}]")
    if out is None:
        b.expect(y, lambda inputs: inputs[x.name].copy())


@st.composite
def windows(draw, b: Builder) -> None:
    """A grid over a BufferedRef with ragged blocks, asynchronous copies in
    through two slots, synchronous copies out. Either `padded` (a kernel
    grid's blocks: any sizes, the slot padded past a cut), or Pallas'
    BufferedRef, whose cut DMAs round up to the TPU tiling: blocks and cuts
    of whole tiles (8 rows, 128 columns)."""
    padded = draw(st.booleans())
    gi, gj = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    if padded:
        br, bc = draw(st.integers(1, 4)), draw(st.integers(1, 5))
        rows = br * (gi - 1) + draw(st.integers(1, br))  # the last may be short
        cols = bc * (gj - 1) + draw(st.integers(1, bc))
    else:  # in tiles: the last block may be short by whole tiles
        br, bc = 8 * draw(st.integers(1, 2)), 128 * draw(st.integers(1, 2))
        rows = br * (gi - 1) + 8 * draw(st.integers(1, br // 8))
        cols = bc * (gj - 1) + 128 * draw(st.integers(1, bc // 128))
    br, bc = min(br, rows), min(bc, cols)  # a block is at most the array
    x = b.param("x", (rows, cols), True)
    y = b.param("y", (rows, cols), False)
    bx = b.fresh("bx")
    options = ", padded" if padded else ""
    b.emit(f"{bx} = buffered_ref {x.name}, block=({br}, {bc}), buffers=2{options}")
    sems = b.semaphores(2)

    def window(action: str, block: str, slot: str) -> None:
        b.emit(
            f"buffered_copy {action} {x.name} -> {bx}[{block}], {sems}[{slot}], "
            f"slot={slot}"
        )

    prefetch, in_loop = draw(st.booleans()), draw(st.booleans())
    if prefetch and not in_loop:
        window("start", "0, 0", "0")
    with b.loop(f"grid({gi}, {gj})", 2) as (i, j):
        step = b.index(f"{gj} * {i} + {j}")
        slot = b.index(f"{step} % 2")
        if prefetch:
            if in_loop:
                with b.when(f"{i} == 0 and {j} == 0"):
                    window("start", "0, 0", "0")
            with b.when(f"{step} + 1 < {gi * gj}"):
                nxt = f"({step} + 1) // {gj}, ({step} + 1) % {gj}"
                window("start", nxt, f"({step} + 1) % 2")
        else:
            window("start", f"{i}, {j}", slot)
        window("wait", f"{i}, {j}", slot)
        b.emit(f"buffered_copy {bx}[{i}, {j}] -> {y.name}, slot={slot}")
    b.expect(y, lambda inputs: inputs[x.name].copy())


@st.composite
def shared(draw, b: Builder) -> None:
    """Two DMAs on one semaphore and one wait for both, or one DMA and two
    smaller waits, per block of a loop."""
    n, rows, cols = (
        draw(st.integers(1, 5)),
        draw(st.integers(2, 6)),
        draw(st.integers(1, 8)),
    )
    half = draw(st.integers(1, rows - 1))
    x = b.param("x", (n * rows, cols), True)
    y = b.param("y", (n * rows, cols), False)
    buf, s = b.alloc((rows, cols)), b.semaphores()
    two_starts = draw(st.booleans())
    lower = draw(st.integers(0, n - 1))
    with b.loop(f"range({lower}, {n})", 1) as (i,):
        row = b.index(f"{rows} * {i}")
        parts = [
            (b.view(x, [(row, half)]), b.view(buf, [(0, half)])),
            (
                b.view(x, [(f"{row} + {half}", rows - half)]),
                b.view(buf, [(half, rows - half)]),
            ),
        ]
        whole = b.view(x, [(row, rows)])
        if two_starts:
            for src, dst in parts:
                b.dma("start", src, dst, s)
            b.dma("wait", whole, buf, s)
        else:
            b.dma("start", whole, buf, s)
            for src, dst in parts:
                b.dma("wait", src, dst, s)
        b.sync_copy(buf, b.view(y, [(row, rows)]))

    def expected(inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        out = b.poison(y.shape)
        out[lower * rows :] = inputs[x.name][lower * rows :]
        return out

    b.expect(y, expected)


@st.composite
def accumulate(draw, b: Builder) -> None:
    """y[i] = the sum over j of block (i, j) of x, in a VMEM accumulator."""
    gi, gj = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 8))
    x = b.param("x", (gi * rows, gj * cols), True)
    y = b.param("y", (gi * rows, cols), False)
    acc, xw = b.alloc((rows, cols)), b.alloc((rows, cols))

    def body(i: str, j: str) -> None:
        with b.when(f"{j} == 0"):
            b.compute(acc, "0")
        block = [(f"{rows} * {i}", rows), (f"{cols} * {j}", cols)]
        b.sync_copy(b.view(x, block), xw)
        b.emit(f"{acc.name} += {xw.name}")
        with b.when(f"{j} == {gj - 1}"):
            b.sync_copy(acc, b.view(y, [(f"{rows} * {i}", rows)]))

    if draw(st.booleans()):
        with b.loop(f"grid({gi}, {gj})", 2) as (i, j):
            body(i, j)
    else:
        with b.loop(f"range({gi})", 1) as (i,), b.loop(f"range({gj})", 1) as (j,):
            body(i, j)

    def expected(inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        blocks = inputs[x.name].reshape(gi * rows, gj, cols)
        total = np.zeros((gi * rows, cols), blocks.dtype)
        for j in range(gj):  # in order, each sum in the dtype
            total = total + blocks[:, j]
        return total

    b.expect(y, expected)


@st.composite
def add(draw, b: Builder) -> None:
    """z += x block by block with DMAs that add, even blocks twice; the
    blocks are independent, so the loop may be parallel."""
    n, rows, cols = (
        draw(st.integers(1, 6)),
        draw(st.integers(1, 4)),
        draw(st.integers(1, 8)),
    )
    x = b.param("x", (n * rows, cols), True)
    z = b.param("z", (n * rows, cols), True)
    sems = b.semaphores(2)
    parallel = ", parallel=(0,)" if draw(st.booleans()) else ""
    with b.loop(f"range({n})", 1, parallel) as (i,):
        src = b.view(x, [(f"{rows} * {i}", rows)])
        dst = b.view(z, [(f"{rows} * {i}", rows)])
        b.copy(src, dst, f"{sems}[{i} % 2]", add=True)
        with b.when(f"{i} % 2 == 0"):
            b.copy(src, dst, f"{sems}[0]", add=True)

    def expected(inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        xs, out = inputs[x.name], inputs[z.name] + inputs[x.name]
        for block in range(0, n, 2):
            rows_of = slice(block * rows, (block + 1) * rows)
            out[rows_of] = out[rows_of] + xs[rows_of]
        return out

    b.expect(z, expected)


@st.composite
def parity(draw, b: Builder) -> None:
    """Nested loops over blocks; (i + j) even and odd blocks are computed
    by different expressions (the odd one under `not`, or as an `or`)."""
    gi, gj = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    x = b.param("x", (gi * rows, gj * cols), True)
    y = b.param("y", (gi * rows, gj * cols), False)
    xw, yw = b.alloc((rows, cols)), b.alloc((rows, cols))
    s = b.semaphores()
    with b.loop(f"range({gi})", 1) as (i,), b.loop(f"range({gj})", 1) as (j,):
        block = [(f"{rows} * {i}", rows), (f"{cols} * {j}", cols)]
        b.copy(b.view(x, block), xw, s)
        even = f"({i} + {j}) % 2 == 0"
        with b.when(even):
            draw(computation(b, yw, [xw]))
        odd = draw(
            st.sampled_from(
                [
                    f"not {even}",
                    f"({i} % 2 == 1 and {j} % 2 == 0) or ({i} % 2 == 0 and {j} % 2 == 1)",
                    f"({i} + {j}) % 2 != 0",
                ]
            )
        )
        with b.when(odd):
            draw(computation(b, yw, [xw]))
        b.copy(yw, b.view(y, block), s)


@st.composite
def descriptor(draw, b: Builder) -> None:
    """`c` (buf -> y) is made before the loop and started in every
    iteration; `d` (buf -> z[i]) is made in each."""
    n, cols = draw(st.integers(1, 5)), draw(st.integers(1, 8))
    x = b.param("x", (n, cols), True)
    y = b.param("y", (cols,), False)
    z = b.param("z", (n, cols), False)
    buf, s = b.alloc((cols,)), b.semaphores()
    c = b.descriptor(buf, y, s)
    with b.loop(f"range({n})", 1) as (i,):
        b.sync_copy(b.view(x, [i]), buf)
        b.async_dma("start", c)
        b.async_dma("wait", c)
        d = b.descriptor(buf, b.view(z, [i]), s)
        b.async_dma("start", d)
        b.async_dma("wait", d)
    b.expect(y, lambda inputs: inputs[x.name][-1].copy())
    b.expect(z, lambda inputs: inputs[x.name].copy())


@st.composite
def guarded(draw, b: Builder) -> None:
    """Copies under kernel-level `when`s, outside any loop: y = x under a
    condition of constants and a named value (`debug = 1`), and a racy
    debug copy (two DMAs in flight into y at once) under the complement,
    where it never runs. A program of these alone has no loop."""
    n = draw(st.integers(1, 8))
    x = b.param("x", (n,), True)
    y = b.param("y", (n,), False)
    flag = draw(st.integers(0, 2))
    debug = b.index(str(flag))
    condition, holds = draw(
        st.sampled_from(
            [
                (f"{debug} == 1", flag == 1),
                (f"{debug} != 1", flag != 1),
                ("1 > 2", False),
                ("2 > 1", True),
                (f"not {debug} == 0", flag != 0),
                (f"{debug} == 0 or {debug} == 2", flag in (0, 2)),
                (f"0 <= {debug} < 2 and {debug} >= 1", flag == 1),
            ]
        )
    )
    good, racy = condition, f"not ({condition})"
    if not holds:
        good, racy = racy, good
    with b.when(good):
        b.sync_copy(x, y)
    s, t = b.semaphores(), b.semaphores()
    with b.when(racy):
        b.dma("start", x, y, s)
        b.dma("start", x, y, t)
        b.dma("wait", x, y, s)
        b.dma("wait", x, y, t)
    b.expect(y, lambda inputs: inputs[x.name].copy())


@st.composite
def parallel(draw, b: Builder) -> None:
    """A grid whose parallel dimensions keep the claim: each iteration
    fetches its own block into VMEM scratch that every iteration reuses
    (written before it is read), computes, and writes its own block of y;
    the parallel dimensions are `parallel=(0,)`, `(0, 1)` or `(1,)`."""
    gi, gj = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    x = b.param("x", (gi * rows, gj * cols), True)
    y = b.param("y", (gi * rows, gj * cols), False)
    xw, yw = b.alloc((rows, cols)), b.alloc((rows, cols))
    dims = draw(st.sampled_from(["(0,)", "(0, 1)", "(1,)"]))
    with b.loop(f"grid({gi}, {gj})", 2, f", parallel={dims}") as (i, j):
        block = [(f"{rows} * {i}", rows), (f"{cols} * {j}", cols)]
        b.sync_copy(b.view(x, block), xw)
        draw(computation(b, yw, [xw]))
        b.sync_copy(yw, b.view(y, block))


@st.composite
def wide(draw, b: Builder) -> None:
    """y = x row by row through indices and conditions near 64 bits whose
    values are small: `i % (2**63 - 1)`, `i // 2**62 + i`, `when i < 2**63
    - 1`, `when i * c >= 0` with i * c past 2**63 - 1 in the last
    iterations (wrapped int64 would make it false there). Exact arithmetic
    gives i and makes every condition hold."""
    n, cols = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    x = b.param("x", (n, cols), True)
    y = b.param("y", (n, cols), False)
    with b.loop(f"range({n})", 1) as (i,):
        index = draw(
            st.sampled_from(
                [f"{i} % {2**63 - 1}", f"{i} // {2**62} + {i}", f"{i} % {2**62 + 1}"]
            )
        )
        over = 2**63 // max(n - 1, 2) + 1  # i * over wraps int64 where i > 1
        condition = draw(
            st.sampled_from(
                [f"{i} < {2**63 - 1}", f"{i} * {over} >= 0", f"{i} + {2**62} > 0"]
            )
        )
        with b.when(condition):
            b.sync_copy(b.view(x, [index]), b.view(y, [i]))
    b.expect(y, lambda inputs: inputs[x.name].copy())


_BUILDERS = {
    "ring": ring,
    "windows": windows,
    "shared": shared,
    "accumulate": accumulate,
    "add": add,
    "parity": parity,
    "descriptor": descriptor,
    "guarded": guarded,
    "parallel": parallel,
    "wide": wide,
}
LOOP_FREE = ("guarded",)
"""Fragments without loops: a program of these alone has none."""


@st.composite
def loop_programs(draw, fragments: Sequence[str] = FRAGMENTS) -> LoopProgram:
    """One kernel of one to three fragments, in one dtype."""
    dtype = draw(st.sampled_from(DTYPES))
    loop_free = [f for f in fragments if f in LOOP_FREE]
    if loop_free and draw(st.integers(0, 5)) == 0:  # a kernel with no loop
        fragments = loop_free
    chosen = draw(st.lists(st.sampled_from(list(fragments)), min_size=1, max_size=3))
    b = Builder(dtype)
    for kind in chosen:
        draw(_BUILDERS[kind](b))
    inputs = {r.name: r.shape for r, given in b.params if given}
    return LoopProgram(b.text(), inputs, dtype, tuple(chosen), tuple(b.expectations))


# --------------------------------------------------------------------------
# Broken parallel claims, for the fault oracle
# --------------------------------------------------------------------------

PARALLEL_FAULTS = ("carried", "same_hbm", "cross_dma", "add_carried")


@dataclass(frozen=True)
class ParallelFault:
    """A grid marked parallel over `i` whose claim one fault breaks, and
    what every mode must report: the message's start and the iteration
    (`i = 1, j = 0`) at which the first broken access is made."""

    program: LoopProgram
    fault: str
    message: str
    iteration: str


@st.composite
def parallel_faults(draw) -> ParallelFault:
    """A parallel grid (i parallel, j sequential inside it) with one fault:

    - `carried`: VMEM state carried across i (an accumulator set before
      the loop and updated in every iteration): iteration 1 reads what
      iteration 0 wrote;
    - `add_carried`: the same through a DMA that adds into VMEM;
    - `same_hbm`: every iteration writes the same block of y;
    - `cross_dma`: a DMA started in iteration 0 and waited in the last.

    The first broken access is at i = 1, j = 0 (the last i, j = 0 for
    `cross_dma`), known by construction."""
    fault = draw(st.sampled_from(PARALLEL_FAULTS))
    gi, gj = draw(st.integers(2, 4)), draw(st.integers(1, 3))
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    b = Builder(draw(st.sampled_from(("f32", "i32"))))
    x = b.param("x", (gi * rows, gj * cols), True)
    y = b.param("y", (gi * rows, gj * cols), False)
    xw, acc = b.alloc((rows, cols)), b.alloc((rows, cols))
    s = b.semaphores()
    b.sync_copy(b.view(x, [(0, rows), (0, cols)]), acc)
    at, message = 1, "Parallel loop {i}: this DMA reads"
    with b.loop(f"grid({gi}, {gj})", 2, ", parallel=(0,)") as (i, j):
        block = [(f"{rows} * {i}", rows), (f"{cols} * {j}", cols)]
        b.sync_copy(b.view(x, block), xw)
        if fault == "carried":
            b.compute(acc, f"{acc.name} + {xw.name}")
            message = "Parallel loop {i}: this computation reads"
        elif fault == "add_carried":
            b.copy(xw, acc, s, add=True)
        else:
            b.compute(acc, xw.name)
        if fault == "same_hbm":
            b.sync_copy(acc, b.view(y, [(0, rows), (0, cols)]))
            message = "Parallel loop {i}: this DMA writes"
        elif fault == "cross_dma":
            corner = [(0, rows), (0, cols)]
            with b.when(f"{i} == 0 and {j} == 0"):
                b.dma("start", b.view(x, corner), b.view(y, corner), s)
            with b.when(f"{i} == {gi - 1} and {j} == 0"):
                b.dma("wait", b.view(x, corner), b.view(y, corner), s)
            at, message = gi - 1, "Parallel loop {i}: this wait finishes the DMA"
        else:
            b.sync_copy(acc, b.view(y, block))
    program = LoopProgram(b.text(), {x.name: x.shape}, b.dtype, (fault,))
    return ParallelFault(program, fault, message.format(i=i), f"at {i} = {at}, {j} = 0")
