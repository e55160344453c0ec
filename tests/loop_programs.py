"""A hypothesis generator of race-free loop programs, for tests to import.

`loop_programs()` draws a `LoopProgram`: the text of one kernel in the MLIR
form of the copy dialect (`generated.mlir`), the shapes of the parameters
to give as inputs, and the dtype. A program is a sequence of fragments;
each fragment has parameters, scratch and semaphores of its own, and waits
every DMA it starts before it ends, so fragments never race with each
other, and each one is race-free by construction under DESIGN's finishing
rule: a buffer slot is written again only after the DMA that last read it
was waited, nothing reads a region before a DMA or an input wrote it, and
every semaphore ends at zero.

Covered (each fragment is drawn with its variants):

- `ring`: a prefetching loop through k slots, `% 2` or `% 3` slot and
  semaphore indices, prefetch depth 1 or k - 1 under `when i + depth < N`,
  the prologue before the loop or under `when i == 0`, the wait as
  `copy.dma "wait"` or through a descriptor made in the loop, and
  optionally a computation between the wait and the copy out;
- `windows`: a grid over a BufferedRef with ragged blocks (the last row
  and column of blocks shorter) through asynchronous window copies on a
  semaphore array, with or without prefetch of the next block in
  row-major order (`floordiv` and `mod` of the flat step), its prologue
  before the loop or under a two-index `when`;
- `shared`: several DMAs on one semaphore and one larger wait, or one DMA
  waited by two smaller descriptors;
- `accumulate`: a sum over the last axis of a grid (or of nested loops)
  into an accumulator that stays in VMEM, `acc = 0` under `when j == 0`
  and written back under `when j == last`;
- `add`: DMAs with `add` into a parameter given as input, under a
  `parallel` loop sometimes, plus a second add under `when i % 2 == 0`;
- `parity`: nested loops whose body computes one of two expressions under
  `when (i + j) % 2 == 0` and its complement (an `or` of two sets);
- `descriptor`: a descriptor made before the loop and started in every
  iteration, beside one made in each iteration;
- computations: random trees of `add sub mul div max min neg` over the
  window just read, the accumulator and literals (float literals for float
  dtypes, small integers otherwise, `div` only for floats), in f32, f16,
  bf16, i32 and i8 (integers wrap);
- loops as `range(0, N)`, `range(a, b)` with a nonzero start, grids, and
  nested `copy.for`s.

Not covered: `priority=1`; SMEM scratch and scalar computations; `Element`
and squeezed window dimensions in loops; loops over a kernel's top-level
pytree `sync_copy` with several leaves; a DMA left in flight across
iterations (every ring waits the slot it reads in the iteration that reads
it, not later); reuse of one semaphore by two fragments; NaN or infinite
inputs (computations may still make them, by division or overflow); bool,
i16, i64, u8 to u32 and f64 dtypes; trip counts above a few dozen.
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
)


@dataclass(frozen=True)
class LoopProgram:
    """A generated program, and the parameters it reads (name -> shape)."""

    text: str
    inputs: dict[str, tuple[int, ...]]
    dtype: str
    fragments: tuple[str, ...]
    expectations: tuple[tuple[str, Expectation], ...] = ()
    filename: str = "generated.mlir"

    @property
    def has_dynamic_blocks(self) -> bool:
        """Block indices from loop indices (the `windows` fragment)."""
        return "windows" in self.fragments

    def parse(self):
        return copyir.parse(self.text, filename=self.filename)

    def expected(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The final value of each output numpy can say directly (those no
        computation writes), unwritten parts poisoned (every byte 0xFF)."""
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
    """A ref value of the program being built: its SSA name and type."""

    name: str
    shape: tuple[int, ...]
    space: str


@dataclass
class Builder:
    """The lines of one kernel in the MLIR form, with fresh SSA names."""

    dtype: str
    params: list[tuple[Ref, bool]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    expectations: list[tuple[str, Expectation]] = field(default_factory=list)
    depth: int = 1
    count: int = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"%{hint}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def type(self, ref: Ref) -> str:
        element = self.dtype
        dims = "".join(f"{d}x" for d in ref.shape)
        return f"!copy.ref<{dims}{element}, {ref.space}>"

    def param(self, hint: str, shape: tuple[int, ...], given: bool) -> Ref:
        """A kernel parameter; `given` ones are inputs."""
        ref = Ref(f"%{hint}{len(self.params)}", shape, "hbm")
        self.params.append((ref, given))
        return ref

    def expect(self, ref: Ref, expectation: Expectation) -> None:
        """What numpy says the parameter `ref` ends as, from the inputs."""
        self.expectations.append((ref.name[1:], expectation))

    def poison(self, shape: tuple[int, ...]) -> np.ndarray:
        numpy = BY_NAME[self.dtype].numpy
        count = int(np.prod(shape)) * numpy.itemsize
        return np.full(count, 0xFF, np.uint8).view(numpy).reshape(shape)

    def alloc(self, shape: tuple[int, ...], space: str = "vmem") -> Ref:
        ref = Ref(self.fresh("buf"), shape, space)
        self.emit(f"{ref.name} = copy.alloc : {self.type(ref)}")
        return ref

    def semaphores(self, count: int | None = None) -> str:
        """A semaphore, or an array of `count` of them."""
        name = self.fresh("sem")
        self.emit(f"{name} = copy.semaphore : {_sem_type(count)}")
        return name

    def sem(self, array: str, count: int, index: int | str) -> str:
        name = self.fresh("s")
        self.emit(f"{name} = copy.sem_index {array}[{index}] : {_sem_type(count)}")
        return name

    def index(self, dims: Sequence[str], expr: str) -> str:
        """An index value: `expr` over d0, d1, .. bound to `dims`."""
        name = self.fresh("ix")
        names = ", ".join(f"d{k}" for k in range(len(dims)))
        self.emit(
            f"{name} = copy.index affine_map<({names}) -> ({expr})>({', '.join(dims)})"
        )
        return name

    def view(self, ref: Ref, subscripts: Sequence[Subscript]) -> Ref:
        """Subscripts: an int or index value (indexed, dropped), or (start,
        size) with an int or index value start."""
        texts, kept = [], []
        for sub in subscripts:
            if isinstance(sub, tuple):
                start, size = sub
                dynamic = isinstance(start, str)
                texts.append(
                    f"ds({start}, {size})" if dynamic else f"{start}:{start + size}"
                )
                kept.append(size)
            else:
                texts.append(str(sub))
        shape = (*kept, *ref.shape[len(subscripts) :])
        view = Ref(self.fresh("v"), shape, ref.space)
        self.emit(
            f"{view.name} = copy.view {ref.name}[{', '.join(texts)}] : {self.type(ref)}"
        )
        return view

    def dma(self, action: str, src: Ref, dst: Ref, sem: str, add: bool = False) -> None:
        option = " add" if add else ""
        self.emit(
            f'copy.dma "{action}" {src.name}, {dst.name}, {sem}{option} : '
            f"{self.type(src)}, {self.type(dst)}, !copy.sem"
        )

    def copy(self, src: Ref, dst: Ref, sem: str, add: bool = False) -> None:
        """A start and its wait."""
        self.dma("start", src, dst, sem, add)
        self.dma("wait", src, dst, sem)

    def sync_copy(self, src: Ref, dst: Ref) -> None:
        self.emit(
            f"copy.sync_copy {src.name} -> {dst.name} : "
            f"({self.type(src)}) -> ({self.type(dst)})"
        )

    def descriptor(self, src: Ref, dst: Ref, sem: str) -> str:
        name = self.fresh("c")
        self.emit(
            f"{name} = copy.async_copy {src.name}, {dst.name}, {sem} : "
            f"{self.type(src)}, {self.type(dst)}, !copy.sem"
        )
        return name

    def async_dma(self, action: str, descriptor: str, add: bool = False) -> None:
        self.emit(f'copy.async_dma "{action}" {descriptor}{" add" if add else ""}')

    def compute(self, dst: Ref, expression: str, inputs: Sequence[Ref]) -> None:
        operands = ", ".join(r.name for r in inputs)
        types = "".join(f", {self.type(r)}" for r in inputs)
        self.emit(
            f'copy.compute {dst.name} = "{expression}" ({operands}) : {self.type(dst)}{types}'
        )

    @contextlib.contextmanager
    def loop(self, header: str, count: int) -> Iterator[list[str]]:
        """`copy.for <names> in <header> {`; yields the index names."""
        names = [self.fresh(n) for n in "ijk"[:count]]
        self.emit(f"copy.for {', '.join(names)} in {header} {{")
        self.depth += 1
        yield names
        self.depth -= 1
        self.emit("}")

    @contextlib.contextmanager
    def when(self, dims: Sequence[str], sets: Sequence[str]) -> Iterator[None]:
        """`copy.when`: an `or` of sets, each a list of constraints over
        d0, d1, .. bound to `dims`."""
        names = ", ".join(f"d{k}" for k in range(len(dims)))
        condition = ", ".join(f"affine_set<({names}) : ({s})>" for s in sets)
        self.emit(f"copy.when [{condition}]({', '.join(dims)}) {{")
        self.depth += 1
        yield
        self.depth -= 1
        self.emit("}")

    def text(self) -> str:
        params = ", ".join(f"{r.name}: {self.type(r)}" for r, _ in self.params)
        body = "\n".join(self.lines)
        return f"copy.kernel @generated({params}) {{\n{body}\n}}\n"


Subscript = int | str | tuple[int | str, int]
Expectation = Callable[[Mapping[str, np.ndarray]], np.ndarray]


def _sem_type(count: int | None) -> str:
    return "!copy.sem" if count is None else f"!copy.sem_array<{count}>"


# --------------------------------------------------------------------------
# Computations
# --------------------------------------------------------------------------


@st.composite
def expressions(draw, dtype: str, operands: int, depth: int = 3) -> str:
    """A prefix expression over `$0 .. $(operands - 1)` and literals."""
    floating = not dtype.startswith("i")
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if operands and draw(st.booleans()):
            return f"${draw(st.integers(0, operands - 1))}"
        return draw(st.sampled_from(FLOAT_LITERALS if floating else INT_LITERALS))
    names = ["add", "sub", "mul", "max", "min", "neg"] + (["div"] if floating else [])
    operation = draw(st.sampled_from(names))
    arity = 1 if operation == "neg" else 2
    args = [draw(expressions(dtype, operands, depth - 1)) for _ in range(arity)]
    return f"({operation} {' '.join(args)})"


def renumbered(expression: str, inputs: Sequence[Ref]) -> tuple[str, list[Ref]]:
    """The expression with its operands numbered by first appearance, and
    the inputs in that order (what the authoring syntax builds)."""
    order: list[int] = []
    out, at = [], 0
    while at < len(expression):
        if expression[at] == "$":
            end = at + 1
            while end < len(expression) and expression[end].isdigit():
                end += 1
            k = int(expression[at + 1 : end])
            if k not in order:
                order.append(k)
            out.append(f"${order.index(k)}")
            at = end
        else:
            out.append(expression[at])
            at += 1
    return "".join(out), [inputs[k] for k in order]


@st.composite
def computation(draw, b: Builder, dst: Ref, inputs: Sequence[Ref]) -> None:
    """dst = a random expression of the inputs (at least one of them)."""
    expression = draw(expressions(b.dtype, len(inputs)))
    if "$" not in expression:
        expression = f"(add $0 {expression})"
    text, used = renumbered(expression, inputs)
    b.compute(dst, text, used)


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
            src = b.view(x, [(p * rows, rows)])
            b.dma("start", src, b.view(buf, [p]), b.sem(sems, k, p))

    if not in_loop:
        prologue()
    with b.loop(f"range(0, {n})", 1) as (i,):
        if in_loop:
            with b.when([i], ["d0 == 0"]):
                prologue()
        slot = b.index([i], f"d0 mod {k}")
        with b.when([i], [f"{n - 1 - depth} - d0 >= 0"]):
            start = b.index([i], f"d0 * {rows} + {depth * rows}")
            nslot = b.index([i], f"(d0 + {depth}) mod {k}")
            src = b.view(x, [(start, rows)])
            b.dma("start", src, b.view(buf, [nslot]), b.sem(sems, k, nslot))
        row = b.index([i], f"d0 * {rows}")
        xv, window, s = (
            b.view(x, [(row, rows)]),
            b.view(buf, [slot]),
            b.sem(sems, k, slot),
        )
        if draw(st.booleans()):
            b.async_dma("wait", b.descriptor(xv, window, s))
        else:
            b.dma("wait", xv, window, s)
        if out is not None:
            draw(computation(b, out, [window]))
            window = out
        b.copy(window, b.view(y, [(row, rows)]), b.sem(outs, k, slot))
    if out is None:
        b.expect(y, lambda inputs: inputs[x.name[1:]].copy())


@st.composite
def windows(draw, b: Builder) -> None:
    """A grid over a BufferedRef with ragged blocks, asynchronous copies in
    through two slots, synchronous copies out."""
    br, bc = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    gi, gj = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    rows = br * (gi - 1) + draw(st.integers(1, br))  # the last block may be short
    cols = bc * (gj - 1) + draw(st.integers(1, bc))
    x = b.param("x", (rows, cols), True)
    y = b.param("y", (rows, cols), False)
    bref = b.fresh("bx")
    btype = f"!copy.buffered<{rows}x{cols}x{b.dtype}, [{br}, {bc}], buffers 2, vmem>"
    b.emit(f"{bref} = copy.buffered_ref : {btype}")
    sems = b.semaphores(2)
    xt = b.type(x)

    def window(action: str, block: str, slot: str, sem: str) -> None:
        b.emit(
            f'copy.buffered_copy "{action}" {x.name} -> {bref}[{block}] slot {slot} '
            f"sem {sem} : {xt} -> {btype}, !copy.sem"
        )

    prefetch, in_loop = draw(st.booleans()), draw(st.booleans())
    if prefetch and not in_loop:
        window("start", "0, 0", "0", b.sem(sems, 2, 0))
    with b.loop(f"grid({gi}, {gj})", 2) as (i, j):
        step = f"d0 * {gj} + d1"
        slot = b.index([i, j], f"({step}) mod 2")
        s = b.sem(sems, 2, slot)
        if prefetch:
            if in_loop:
                with b.when([i, j], ["d0 == 0, d1 == 0"]):
                    window("start", "0, 0", "0", b.sem(sems, 2, 0))
            with b.when([i, j], [f"{gi * gj - 2} - d0 * {gj} - d1 >= 0"]):
                ni = b.index([i, j], f"({step} + 1) floordiv {gj}")
                nj = b.index([i, j], f"({step} + 1) mod {gj}")
                ns = b.index([i, j], f"({step} + 1) mod 2")
                window("start", f"{ni}, {nj}", ns, b.sem(sems, 2, ns))
        else:
            window("start", f"{i}, {j}", slot, s)
        window("wait", f"{i}, {j}", slot, s)
        b.emit(
            f"copy.buffered_copy {bref}[{i}, {j}] -> {y.name} slot {slot} : {btype} -> {xt}"
        )


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
        row = b.index([i], f"d0 * {rows}")
        mid = b.index([i], f"d0 * {rows} + {half}")
        parts = [
            (b.view(x, [(row, half)]), b.view(buf, [(0, half)])),
            (b.view(x, [(mid, rows - half)]), b.view(buf, [(half, rows - half)])),
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
        out[lower * rows :] = inputs[x.name[1:]][lower * rows :]
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
        with b.when([j], ["d0 == 0"]):
            b.compute(acc, "0", [])
        r, c = b.index([i], f"d0 * {rows}"), b.index([j], f"d0 * {cols}")
        b.sync_copy(b.view(x, [(r, rows), (c, cols)]), xw)
        b.compute(acc, "(add $0 $1)", [acc, xw])
        with b.when([j], [f"d0 == {gj - 1}"]):
            b.sync_copy(acc, b.view(y, [(r, rows)]))

    if draw(st.booleans()):
        with b.loop(f"grid({gi}, {gj})", 2) as (i, j):
            body(i, j)
    else:
        with b.loop(f"range(0, {gi})", 1) as (i,), b.loop(f"range(0, {gj})", 1) as (j,):
            body(i, j)

    def expected(inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        blocks = inputs[x.name[1:]].reshape(gi * rows, gj, cols)
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
    parallel = " parallel [0]" if draw(st.booleans()) else ""
    with b.loop(f"range(0, {n}){parallel}", 1) as (i,):
        row = b.index([i], f"d0 * {rows}")
        src, dst = b.view(x, [(row, rows)]), b.view(z, [(row, rows)])
        b.copy(src, dst, b.sem(sems, 2, b.index([i], "d0 mod 2")), add=True)
        with b.when([i], ["d0 mod 2 == 0"]):
            b.copy(src, dst, b.sem(sems, 2, 0), add=True)

    def expected(inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        xs, out = inputs[x.name[1:]], inputs[z.name[1:]] + inputs[x.name[1:]]
        for block in range(0, n, 2):
            rows_of = slice(block * rows, (block + 1) * rows)
            out[rows_of] = out[rows_of] + xs[rows_of]
        return out

    b.expect(z, expected)


@st.composite
def parity(draw, b: Builder) -> None:
    """Nested loops over blocks; (i + j) even and odd blocks are computed
    by different expressions (the odd one as an `or` of two sets)."""
    gi, gj = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    x = b.param("x", (gi * rows, gj * cols), True)
    y = b.param("y", (gi * rows, gj * cols), False)
    xw, yw = b.alloc((rows, cols)), b.alloc((rows, cols))
    s = b.semaphores()
    with b.loop(f"range(0, {gi})", 1) as (i,), b.loop(f"range(0, {gj})", 1) as (j,):
        r, c = b.index([i], f"d0 * {rows}"), b.index([j], f"d0 * {cols}")
        block = [(r, rows), (c, cols)]
        b.copy(b.view(x, block), xw, s)
        with b.when([i, j], ["(d0 + d1) mod 2 == 0"]):
            draw(computation(b, yw, [xw]))
        odd = ["d0 mod 2 == 1, d1 mod 2 == 0", "d0 mod 2 == 0, d1 mod 2 == 1"]
        with b.when([i, j], odd):
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
    with b.loop(f"range(0, {n})", 1) as (i,):
        b.sync_copy(b.view(x, [i]), buf)
        b.async_dma("start", c)
        b.async_dma("wait", c)
        d = b.descriptor(buf, b.view(z, [i]), s)
        b.async_dma("start", d)
        b.async_dma("wait", d)
    b.expect(y, lambda inputs: inputs[x.name[1:]][-1].copy())
    b.expect(z, lambda inputs: inputs[x.name[1:]].copy())


_BUILDERS = {
    "ring": ring,
    "windows": windows,
    "shared": shared,
    "accumulate": accumulate,
    "add": add,
    "parity": parity,
    "descriptor": descriptor,
}


@st.composite
def loop_programs(draw, fragments: Sequence[str] = FRAGMENTS) -> LoopProgram:
    """One kernel of one to three fragments, in one dtype."""
    dtype = draw(st.sampled_from(DTYPES))
    chosen = draw(st.lists(st.sampled_from(list(fragments)), min_size=1, max_size=3))
    b = Builder(dtype)
    for kind in chosen:
        draw(_BUILDERS[kind](b))
    inputs = {r.name[1:]: r.shape for r, given in b.params if given}
    return LoopProgram(b.text(), inputs, dtype, tuple(chosen), tuple(b.expectations))
