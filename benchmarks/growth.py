"""How each stage's time grows with the program: the time at N, 2N, 4N and 8N.

    python benchmarks/growth.py [CASE ...] [--list] [--seconds S] [--repeat R]

For each case, prints the time at N, 2N, 4N and 8N and the ratio of each
time to the one before it: 2.0 per doubling is linear growth, 4.0 quadratic.
The target is at most 2.3 everywhere. N is chosen per case so that fixed
costs do not hide the growth: doubling from the case's start until the 8N
run takes at least S seconds (default 1), unless the case fixes N. Each
time is the best of R runs (default 3), in CPU seconds of this process
(`time.process_time`), so that other work on the machine disturbs the
ratios less than it would wall-clock time; each includes the garbage
collector's, during the stage and collecting what it left (see
measure.py).

A case is a function registered with `@case(name)`: it takes n, builds a
program of that size (untimed) and returns the stage to time, a function of
no arguments. Its docstring's first line is printed as its description.
Name cases `<stage>-<shape of the program>`.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from measure import paid

import copyir
from copyir.api import apply_passes, pipeline
from copyir.testing import nested_pipeline_in_loop

Stage = Callable[[], object]


@dataclass(frozen=True)
class Case:
    name: str
    prepare: Callable[[int], Stage]
    """n -> the stage to time, on a program of size n built beforehand."""
    start: int = 64
    """Where the search for N starts."""
    n: int | None = None
    """A fixed N instead of the search."""

    @property
    def description(self) -> str:
        return (self.prepare.__doc__ or "").strip().splitlines()[0]


CASES: dict[str, Case] = {}


def case(name: str, *, start: int = 64, n: int | None = None):
    """Register a case: `@case("verify-view-chain")` above its prepare function."""

    def register(prepare: Callable[[int], Stage]) -> Callable[[int], Stage]:
        CASES[name] = Case(name, prepare, start, n)
        return prepare

    return register


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------


def view_chain(n: int) -> str:
    """A chain of n views of x, each one row shorter, and n DMA pairs that
    copy its last view (one row) to VMEM."""
    lines = [
        f"kernel chain(x: f32[{n + 1}, 128] @hbm) {{",
        "  buf = alloc f32[1, 128] @vmem",
        "  s = semaphore",
        "  v0 = x[1:]",
    ]
    lines += [f"  v{i} = v{i - 1}[1:]" for i in range(1, n)]
    for _ in range(n):
        lines.append(f"  copy_start v{n - 1} -> buf, s")
        lines.append(f"  copy_wait v{n - 1} -> buf, s")
    return "\n".join([*lines, "}"]) + "\n"


def view_chain_sync_copies(n: int) -> str:
    """A chain of n views of x, and n `sync_copy`s of its last view."""
    lines = [
        f"kernel chain(x: f32[{n + 1}, 128] @hbm) {{",
        "  buf = alloc f32[1, 128] @vmem",
        "  v0 = x[1:]",
    ]
    lines += [f"  v{i} = v{i - 1}[1:]" for i in range(1, n)]
    lines += [f"  sync_copy (v{n - 1},) -> (buf,)" for _ in range(n)]
    return "\n".join([*lines, "}"]) + "\n"


def many_params(n: int) -> str:
    """A kernel of n parameters, each copied to VMEM by a DMA pair."""
    params = ",\n".join(f"    p{i}: f32[8, 128] @hbm" for i in range(n))
    lines = [f"kernel params(\n{params}\n) {{", "  buf = alloc f32[8, 128] @vmem"]
    lines.append("  s = semaphore")
    for i in range(n):
        lines.append(f"  copy_start p{i} -> buf, s")
        lines.append(f"  copy_wait p{i} -> buf, s")
    return "\n".join([*lines, "}"]) + "\n"


def record_copy(n: int) -> str:
    """One `sync_copy` of a record of n leaves, rows of x into rows of buf."""
    src = ", ".join(f"k{i}: x[{i}]" for i in range(n))
    dst = ", ".join(f"k{i}: buf[{i}]" for i in range(n))
    return (
        f"kernel record(x: f32[{n}, 128] @hbm) {{\n"
        f"  buf = alloc f32[{n}, 128] @vmem\n"
        f"  sync_copy {{{src}}} -> {{{dst}}}\n}}\n"
    )


def ring(n: int) -> str:
    """N start/wait pairs through 16 VMEM slots, unrolled (the shape of a
    generated program): each line is one DMA_LINE token, and each view it
    writes is an op of its own (`cse` merges the equal ones)."""
    lines = [
        f"kernel ring(x: f32[{n}, 8, 128] @hbm) {{",
        "  buf = alloc f32[16, 8, 128] @vmem",
        "  s = semaphore[16]",
    ]
    for i in range(n):
        for kind in ("copy_start", "copy_wait"):
            lines.append(f"  {kind} x[{i}] -> buf[{i % 16}], s[{i % 16}]")
    return "\n".join([*lines, "}"]) + "\n"


def sibling_loops(n: int) -> str:
    """N sibling loops of 4 iterations, each copying rows of x through a
    dynamic view (loop dimensions are numbered per kernel: the last is N)."""
    lines = [
        "kernel siblings(x: f32[4, 128] @hbm) {",
        "  buf = alloc f32[128] @vmem",
    ]
    for _ in range(n):
        lines += ["  for i in range(4) {", "    sync_copy x[i] -> buf", "  }"]
    return "\n".join([*lines, "}"]) + "\n"


def pipelines_over_one_input(n: int) -> str:
    """N pipelines in x, out y: every window a fresh name from `x_window`
    and `y_window` (a search from the start each time would be quadratic)."""
    spec = "block=(1, 128) index=(i) -> (0, 0)"
    lines = ["kernel many(x: f32[1, 128] @hbm, y: f32[1, 128] @hbm) {"]
    for _ in range(n):
        lines.append(f"  pipeline grid=(1,) in x {spec} out y {spec} (xw, yw) {{")
        lines += ["    yw[...] = xw", "  }"]
    return "\n".join([*lines, "}"]) + "\n"


def parsed(text: str) -> object:
    return copyir.parse(text, "growth.cpy")


def verified(text: str) -> object:
    module = parsed(text)
    copyir.verify(module)
    return module


def lowering(module) -> Stage:
    """The default pipeline's passes on a verified module."""
    passes = pipeline()
    return lambda: apply_passes(module, passes)


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------


@case("verify-view-chain")
def _verify_view_chain(n: int) -> Stage:
    """verify: a chain of N views, its last view copied by N DMA pairs"""
    module = parsed(view_chain(n))
    return lambda: copyir.verify(module)


@case("verify-view-chain-sync-copy")
def _verify_view_chain_sync(n: int) -> Stage:
    """verify: a chain of N views, its last view copied by N sync_copys"""
    module = parsed(view_chain_sync_copies(n))
    return lambda: copyir.verify(module)


@case("verify-loop-dmas")
def _verify_loop_dmas(n: int) -> Stage:
    """verify: N DMA pairs through dynamic views in one loop (each counted
    against the run's limits, its address bounded)"""
    pair = (
        "    copy_start x[ds(i % 8, 1)] -> buf[ds(i, 1)], s\n"
        "    copy_wait x[ds(i % 8, 1)] -> buf[ds(i, 1)], s\n"
    )
    text = (
        "kernel k(x: f32[8] @hbm) {\n  buf = alloc f32[8] @vmem\n"
        "  s = semaphore\n  for i in range(8) {\n" + pair * n + "  }\n}\n"
    )
    module = parsed(text)
    return lambda: copyir.verify(module)


@case("lower-view-chain")
def _lower_view_chain(n: int) -> Stage:
    """lower (the passes): a chain of N views, its last view in N DMA pairs"""
    return lowering(verified(view_chain(n)))


@case("parse-verify-params")
def _parse_verify_params(n: int) -> Stage:
    """parse + verify: a kernel of N parameters, a DMA pair for each"""
    text = many_params(n)
    return lambda: copyir.verify(parsed(text))


@case("parse-verify-params-mlir")
def _parse_verify_params_mlir(n: int) -> Stage:
    """parse + verify (MLIR form): a kernel of N parameters, a DMA pair each"""
    text = copyir.to_text(parsed(many_params(n)), "mlir")
    return lambda: copyir.verify(copyir.parse(text, "growth.mlir"))


@case("lower-params")
def _lower_params(n: int) -> Stage:
    """lower (the passes): a kernel of N parameters, a DMA pair for each"""
    return lowering(verified(many_params(n)))


@case("parse-verify-record")
def _parse_verify_record(n: int) -> Stage:
    """parse + verify: one sync_copy of a record of N leaves"""
    text = record_copy(n)
    return lambda: copyir.verify(parsed(text))


@case("lower-record")
def _lower_record(n: int) -> Stage:
    """lower (the passes): one sync_copy of a record of N leaves"""
    return lowering(verified(record_copy(n)))


@case("print-mlir-record")
def _print_mlir_record(n: int) -> Stage:
    """print (MLIR form): one sync_copy of a record of N leaves"""
    module = parsed(record_copy(n))
    return lambda: copyir.to_text(module, "mlir")


@case("print-cpy-params")
def _print_cpy_params(n: int) -> Stage:
    """print (authoring syntax): a kernel of N parameters, a DMA pair each"""
    module = parsed(many_params(n))
    return lambda: copyir.to_text(module, "cpy")


@case("verify-sibling-loops")
def _verify_sibling_loops(n: int) -> Stage:
    """verify: N sibling loops, each with a dynamic view"""
    module = parsed(sibling_loops(n))
    return lambda: copyir.verify(module)


@case("parse-verify-ring")
def _parse_verify_ring(n: int) -> Stage:
    """parse + verify: an unrolled ring of N DMA pairs through 16 slots"""
    text = ring(n)
    return lambda: copyir.verify(parsed(text))


@case("cse-ring")
def _cse_ring(n: int) -> Stage:
    """cse: an unrolled ring of N DMA pairs, each wait's views equal to its
    start's"""
    module = verified(ring(n))
    passes = pipeline("cse")
    return lambda: apply_passes(module, passes)


@case("parse-verify-computations")
def _parse_verify_computations(n: int) -> Stage:
    """parse + verify: N computations of four operations each (a region of
    scalar ops per computation)"""
    lines = [
        "kernel k(a: f32[8, 128] @hbm) {",
        "  x = alloc f32[8, 128] @vmem",
        "  y = alloc f32[8, 128] @vmem",
        "  sync_copy a -> x",
        *["  y[...] = 2.0 * x + x * x - 1.0"] * n,
        "}",
    ]
    text = "\n".join(lines) + "\n"
    return lambda: copyir.verify(parsed(text))


@case("print-cpy-ring")
def _print_cpy_ring(n: int) -> Stage:
    """print (authoring syntax): an unrolled ring of N DMA pairs, 16 slots"""
    module = parsed(ring(n))
    return lambda: copyir.to_text(module, "cpy")


@case("lower-pipelines-one-input")
def _lower_pipelines_one_input(n: int) -> Stage:
    """lower (the passes): N pipelines over one input, each window named anew"""
    return lowering(verified(pipelines_over_one_input(n)))


# --------------------------------------------------------------------------
# The checking interpreter: streams built as tables
# --------------------------------------------------------------------------


def _stream(buffers, starts, sems: int = 1):
    """A stream of the given starts (dicts of fields), all started first
    and then each waited (all in flight at once)."""
    import numpy as np

    from copyir.stream import START, WAIT, Stream, instruction_dtype

    n = len(starts)
    table = np.zeros(2 * n, instruction_dtype(2))
    table["origin"] = -1
    for row, fields in enumerate(starts):
        table[row]["op"] = START
        for key, value in fields.items():
            table[row][key] = value
        table[n + row]["op"] = WAIT
        table[n + row]["sem"] = fields.get("sem", 0)
        table[n + row]["bytes"] = fields["bytes"]
    return Stream("growth", "default", sems, buffers, table)


def reads_of_one_buffer(n: int):
    """N DMAs in flight at once, all reading the whole of x, each writing
    its own row of buf."""
    from copyir.stream import Buffer

    x = Buffer("x", "hbm", 0, "f32", (128,), True)
    buf = Buffer("buf", "vmem", 0, "f32", (n, 128), False)
    common = {"dst_space": 1, "dtype": 9, "rank": 1, "shape": (128, 0)}
    common |= {"src_strides": (1, 0), "dst_strides": (1, 0), "bytes": 512}
    return _stream([x, buf], [common | {"dst_address": 512 * i} for i in range(n)])


def column_dmas(n: int, sems: int = 1):
    """N column DMAs of a (64, N) buffer in flight at once: byte spans that
    all cover the buffer."""
    from copyir.stream import Buffer

    x = Buffer("x", "hbm", 0, "f32", (64, n), True)
    buf = Buffer("buf", "vmem", 0, "f32", (64, n), False)
    common = {"dst_space": 1, "dtype": 9, "rank": 1, "shape": (64, 0)}
    common |= {"src_strides": (n, 0), "dst_strides": (n, 0), "bytes": 256}
    starts = [
        common | {"src_address": 4 * i, "dst_address": 4 * i, "sem": i % sems}
        for i in range(n)
    ]
    return _stream([x, buf], starts, sems)


def _checked(stream, mode: str = "random") -> Stage:
    from copyir.backends.interpreter import Executable

    return lambda: Executable(stream, {"x"}, mode)


@case("check-reads-of-one-buffer", start=256)
def _check_reads(n: int) -> Stage:
    """check: N DMAs in flight at once, all reading one buffer"""
    return _checked(reads_of_one_buffer(n))


@case("check-column-dmas", start=256)
def _check_columns(n: int) -> Stage:
    """check: N column DMAs in flight at once (spans cover the buffer)"""
    return _checked(column_dmas(n))


@case("check-n-semaphores", start=256)
def _check_semaphores(n: int) -> Stage:
    """check: N DMAs in flight on N semaphores, each finished by its wait"""
    return _checked(column_dmas(n, n))


@case("check-on-wait", start=256)
def _check_on_wait(n: int) -> Stage:
    """check and schedule in on_wait mode: N DMAs pending on one semaphore"""
    return _checked(column_dmas(n), "on_wait")


@case("check-loop", start=1024)
def _check_loop(n: int) -> Stage:
    """check: a double-buffered dma.loop of N iterations"""
    from copyir.stream import read_dma

    block, y = 4096, n * 4096
    box = "[128, 1]"
    fetch = (
        f"hbm {{(d0) -> (d0 * {block} + {block})}} {box} -> "
        f"vmem {{(d0) -> (((d0 + 1) mod 2) * {block})}} {box} f32 [8, 128] "
        f"sem {{(d0) -> ((d0 + 1) mod 2)}} if {{(d0) : ({n - 2} - d0 >= 0)}}"
    )
    back = (
        f"vmem {{(d0) -> ((d0 mod 2) * {block})}} {box} -> "
        f"hbm {{(d0) -> (d0 * {block} + {y})}} {box} f32 [8, 128] "
        "sem {(d0) -> (d0 mod 2 + 2)}"
    )
    lines = [
        'dma.program "db" target "default" semaphores 4 {',
        f'  dma.buffer "x" "hbm" 0 f32 [{8 * n}, 128] param',
        f'  dma.buffer "y" "hbm" {y} f32 [{8 * n}, 128] param',
        '  dma.buffer "buf" "vmem" 0 f32 [2, 8, 128]',
        f"  dma.start hbm 0 {box} -> vmem 0 {box} f32 [8, 128] sem 0",
        f'  dma.loop "i" {n} {{',
        f"    dma.start {fetch}",
        f"    dma.wait sem {{(d0) -> (d0 mod 2)}} bytes {block}",
        f"    dma.start {back}",
        f"    dma.wait sem {{(d0) -> (d0 mod 2 + 2)}} bytes {block}",
        "  }",
        "}",
    ]
    text = "\n".join(lines).replace(" hbm ", ' "hbm" ').replace(" vmem ", ' "vmem" ')
    return _checked(read_dma(text, "db.dma"))


def pipeline_text(n: int, options: str = "") -> str:
    """A pipeline over grid (n,): (8, 128) blocks in and out, 2 buffers each
    (with `options` such as ` dimension_semantics [parallel] cores 3`)."""
    ref = f"!copy.ref<{8 * n}x128xf32, hbm>"
    window = "!copy.ref<8x128xf32, vmem>"
    spec = f"{ref} block [8, 128] index affine_map<(d0) -> (d0, 0)> buffers 2"
    return f"""copy.kernel @stream(%x: {ref}, %y: {ref}) {{
  copy.pipeline grid({n}){options} in %x : {spec}, out %y : {spec} (%xw, %yw, %i) {{
    copy.compute %yw (%xw) : {window}, {window} {{
    ^bb0(%element: f32):
      scalar.yield %element : f32
    }}
  }}
}}
"""


@case("verify-pipeline-grid", n=65536)
def _verify_pipeline(n: int) -> Stage:
    """verify (its schedule analysis): a pipeline over a grid of N steps

    N is fixed: a grid of 16N steps would pass the limit of events a run can
    hold (`copyir.limits.MAX_EVENTS`), which verify refuses."""
    module = copyir.parse(pipeline_text(n), "growth.mlir")
    return lambda: copyir.verify(module)


@case("verify-ragged-pipeline", n=32768)
def _verify_ragged_pipeline(n: int) -> Stage:
    """verify: a pipeline of N steps whose last 16-row block the array's
    end cuts by a whole tile (each block's DMA rounded up to the tiling,
    checked against the array's end at every step)

    N is fixed, as for verify-pipeline-grid (the limit of events)."""
    ref = f"f32[{16 * n - 8}, 128] @hbm"
    text = f"""kernel ragged(x: {ref}, y: {ref}) {{
  pipeline grid=({n},)
      in  x block=(16, 128) index=(i) -> (i, 0)
      out y block=(16, 128) index=(i) -> (i, 0)
      (xw, yw) {{
    yw[...] = xw
  }}
}}
"""
    module = copyir.parse(text, "growth.cpy")
    return lambda: copyir.verify(module)


@case("verify-ragged-windows")
def _verify_ragged_windows(n: int) -> Stage:
    """verify: N block copies in one loop through a BufferedRef whose last
    block the array's end cuts by a whole tile (each rounded DMA checked
    over the loop's domain)"""
    pair = (
        "    buffered_copy x -> bx[i, 0], slot=0\n"
        "    buffered_copy bx[i, 0] -> y, slot=0\n"
    )
    ref = "f32[120, 128] @hbm"
    text = (
        f"kernel ragged(x: {ref}, y: {ref}) {{\n"
        "  bx = buffered_ref x, block=(16, 128), buffers=1\n"
        "  for i in range(8) {\n" + pair * n + "  }\n}\n"
    )
    module = parsed(text)
    return lambda: copyir.verify(module)


@case("check-pipeline-lookahead-inout", n=16384)
def _check_pipeline_lookahead_inout(n: int) -> Stage:
    """check: a pipeline of N steps with a looking-ahead input of bounded
    slices (3 buffers, each 12-row slice rounded to 16) and an inout
    operand (buffers (2, 2): its own fetches and write-backs)"""
    ref = f"f32[{16 * n}, 128] @hbm"
    text = f"""kernel both(x: {ref}, y: {ref}) {{
  pipeline grid=({n},)
      in    x block=(BoundedSlice(16), 128) index=(i) -> (ds(16 * i, 12), 0)
            buffers=3 lookahead
      inout y block=(16, 128) index=(i) -> (i, 0) buffers=(2, 2)
      (xw, yw) {{
    yw += xw
  }}
}}
"""
    stream = copyir.to_stream(copyir.lower(text))
    from copyir.backends.interpreter import Executable

    return lambda: Executable(stream, {"x", "y"}, "random")


@case("check-pipeline-cores", start=1024)
def _check_pipeline_cores(n: int) -> Stage:
    """check: the pipeline of N steps split over 3 cores (`_partition_grid`,
    unevenly: two schedules under `when`s in a parallel loop)"""
    options = " dimension_semantics [parallel] cores 3"
    return _checked(copyir.to_stream(copyir.lower(pipeline_text(n + 1, options))))


@case("check-pipeline", start=1024)
def _check_pipeline(n: int) -> Stage:
    """check: the lowered pipeline of N steps (2N DMAs, N computations)"""
    return _checked(copyir.to_stream(copyir.lower(pipeline_text(n))))


@case("check-nested-pipeline-in-loop", start=1024)
def _check_nested_pipeline(n: int) -> Stage:
    """check: a loop of N steps around a nested pipeline (4N DMAs, 4N
    computations); the stream's size does not depend on N"""
    return _checked(copyir.to_stream(copyir.lower(nested_pipeline_in_loop(n))))


def parallel_text(n: int) -> str:
    """A parallel loop of n iterations: each fetches its row of x into VMEM
    scratch that all reuse, adds a table read by all from before the loop,
    and writes its row of y (the claim holds)."""
    ref = f"f32[{n}, 128] @hbm"
    return f"""kernel par(x: {ref}, y: {ref}, t: f32[128] @hbm) {{
  buf = alloc f32[128] @vmem
  table = alloc f32[128] @vmem
  sync_copy t -> table
  for i in range({n}), parallel=(0,) {{
    sync_copy x[i] -> buf
    buf[...] = buf + table
    sync_copy buf -> y[i]
  }}
}}
"""


@case("check-parallel-loop", start=1024)
def _check_parallel(n: int) -> Stage:
    """check with the parallel claim: N iterations reusing VMEM scratch"""
    from copyir.backends.interpreter import Executable

    stream = copyir.to_stream(copyir.lower(parallel_text(n)))
    return lambda: Executable(stream, {"x", "t"}, "eager")


@case("check-parallel-revisits", start=1024)
def _check_parallel_revisits(n: int) -> Stage:
    """check with the parallel claim: 4 parallel rows, N/4 steps each
    writing the row's block of y again"""
    ref = "f32[4, 128] @hbm"
    text = f"""kernel rev(x: {ref}, y: {ref}) {{
  buf = alloc f32[128] @vmem
  for i, j in grid(4, {max(n // 4, 1)}), parallel=(0,) {{
    sync_copy x[i] -> buf
    sync_copy buf -> y[i]
  }}
}}
"""
    from copyir.backends.interpreter import Executable

    stream = copyir.to_stream(copyir.lower(text))
    return lambda: Executable(stream, {"x"}, "eager")


@case("check-parallel-pipeline", start=256)
def _check_parallel_pipeline(n: int) -> Stage:
    """check with the parallel claim: a pipeline over grid (N, 2), the
    first dimension parallel"""
    ref = f"!copy.ref<{8 * n}x256xf32, hbm>"
    window = "!copy.ref<8x128xf32, vmem>"
    spec = f"{ref} block [8, 128] index affine_map<(d0, d1) -> (d0, d1)> buffers 2"
    specs = f"in %x : {spec}, out %y : {spec}"
    grid = f"grid({n}, 2) dimension_semantics [parallel, arbitrary]"
    text = f"""copy.kernel @stream(%x: {ref}, %y: {ref}) {{
  copy.pipeline {grid} {specs} (%xw, %yw, %i, %j) {{
    copy.compute %yw (%xw) : {window}, {window} {{
    ^bb0(%element: f32):
      scalar.yield %element : f32
    }}
  }}
}}
"""
    from copyir.backends.interpreter import Executable

    stream = copyir.to_stream(copyir.lower(text))
    return lambda: Executable(stream, {"x"}, "eager")


def opaque_loop_text(n: int) -> str:
    """A loop of n iterations, each fetching a row of x into VMEM, two opaque
    computations on it (a reduction into SMEM, then an elementwise one), and
    the result written to a row of y: poison that reaches the output."""
    ref = f"f32[{n}, 128] @hbm"
    return f"""kernel soft(x: {ref}, y: {ref}) {{
  a = alloc f32[128] @vmem
  b = alloc f32[128] @vmem
  m = alloc f32[] @smem
  for i in range({n}) {{
    sync_copy x[i] -> a
    opaque "reduce_max" (a) -> (m)
    opaque "exp" (a, m) -> (b)
    sync_copy b -> y[i]
  }}
}}
"""


def scope_loop_text(n: int) -> str:
    """A loop of n steps, each in a scope of its own VMEM buffer and
    semaphore (Pallas' run_scoped per grid step): fetched, scaled, written
    back."""
    ref = f"f32[{8 * n}, 128] @hbm"
    return f"""kernel scoped(x: {ref}, y: {ref}) {{
  for i in range({n}) {{
    scope {{
      buf = alloc f32[8, 128] @vmem
      sem = semaphore
      copy_start x[ds(8 * i, 8)] -> buf, sem
      copy_wait x[ds(8 * i, 8)] -> buf, sem
      buf[...] = 2.0 * buf
      copy_start buf -> y[ds(8 * i, 8)], sem
      copy_wait buf -> y[ds(8 * i, 8)], sem
    }}
  }}
}}
"""


@case("run-opaque-loop", start=1024)
def _run_opaque_loop(n: int) -> Stage:
    """compile and run: a loop of N iterations of two opaque computations,
    their poison tracked into the output (and reported)"""
    import warnings

    import numpy as np
    from copyir.backends.interpreter import Executable

    from copyir.errors import CopyIRWarning

    stream = copyir.to_stream(copyir.lower(opaque_loop_text(n)))
    inputs = {"x": np.zeros((n, 128), np.float32)}

    def stage() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CopyIRWarning)
            Executable(stream, {"x"}, "eager").run(inputs)

    return stage


@case("check-scope-loop", start=1024)
def _check_scope_loop(n: int) -> Stage:
    """check: a scope in a loop of N steps (a fresh buffer and semaphore
    each: N invalidations, N releases of each)"""
    from copyir.backends.interpreter import Executable

    stream = copyir.to_stream(copyir.lower(scope_loop_text(n)))
    return lambda: Executable(stream, {"x"}, "random")


@case("check-protocol-scope-loop", start=1024)
def _lower_scope_loop(n: int) -> Stage:
    """check_protocol: parse, verify, lower and check a scope in a loop of N
    steps (the stream stays 8 instructions)"""
    text = scope_loop_text(n)
    return lambda: copyir.check_protocol(text)


def nested_when_text(n: int) -> str:
    """N DMAs, each under `when i != c` four deep in a loop of 8: the
    lowering multiplies the conditions and drops what holds nowhere."""
    lines = [f"kernel nested(x: f32[{n}, 8, 128] @hbm, y: f32[{n}, 8, 128] @hbm) {{"]
    lines.append("  s = semaphore")
    lines.append("  for i in range(8) {")
    for k in range(n):
        lines += [f"    {'  ' * c}when i != {c} {{" for c in range(4)]
        lines.append(f"            copy_start x[{k}, i] -> y[{k}, i], s")
        lines.append(f"            copy_wait x[{k}, i] -> y[{k}, i], s")
        lines += [f"    {'  ' * c}}}" for c in reversed(range(4))]
    return "\n".join([*lines, "  }", "}", ""])


@case("lower-nested-when", start=256)
def _lower_nested_when(n: int) -> Stage:
    """lower: N DMAs each under four nested `when i != c` (the predicate's
    product, pruned as it is made)"""
    module = copyir.parse(nested_when_text(n))
    return lambda: copyir.lower(module)


def clamped_loop_text(n: int) -> str:
    """A double-buffered loop of n steps whose blocks of 8 rows start at
    min(8 * i, last) of an array of 8n - 4 rows (the last block clamped,
    overlapping the one before it), copied in and back out."""
    rows = 8 * n - 4
    return f"""kernel clamped(x: f32[{rows}, 128] @hbm, y: f32[{rows}, 128] @hbm) {{
  buf = alloc f32[2, 8, 128] @vmem
  ins = semaphore[2]
  outs = semaphore[2]
  for i in range({n}) {{
    slot = i % 2
    start = min(8 * i, {rows - 8})
    copy_start x[ds(start, 8)] -> buf[slot], ins[slot]
    copy_wait x[ds(start, 8)] -> buf[slot], ins[slot]
    copy_start buf[slot] -> y[ds(start, 8)], outs[slot]
    copy_wait buf[slot] -> y[ds(start, 8)], outs[slot]
  }}
}}
"""


@case("check-clamped-loop", start=1024)
def _check_clamped_loop(n: int) -> Stage:
    """check: a loop of N steps whose blocks start at min(8 * i, last), the
    stream 8 instructions (two pieces per DMA) at every N"""
    from copyir.backends.interpreter import Executable

    stream = copyir.to_stream(copyir.lower(copyir.parse(clamped_loop_text(n))))
    assert len(stream.instructions) == 8
    return lambda: Executable(stream, {"x"}, "random")


def clamped_dmas_text(n: int) -> str:
    """N DMA pairs in one loop, each through a view whose start is a min."""
    pair = (
        "    copy_start x[ds(min(i + {k}, 7), 1)] -> buf[ds(i, 1)], s\n"
        "    copy_wait x[ds(min(i + {k}, 7), 1)] -> buf[ds(i, 1)], s\n"
    )
    body = "".join(pair.format(k=k % 8) for k in range(n))
    return (
        "kernel k(x: f32[8] @hbm) {\n  buf = alloc f32[8] @vmem\n"
        "  s = semaphore\n  for i in range(8) {\n" + body + "  }\n}\n"
    )


@case("lower-clamped-dmas")
def _lower_clamped_dmas(n: int) -> Stage:
    """lower (the passes, expand-min-max first of them to matter): N DMA
    pairs in one loop, each view's start a min"""
    return lowering(verified(clamped_dmas_text(n)))


@case("verify-clamped-dmas")
def _verify_clamped_dmas(n: int) -> Stage:
    """verify: N DMA pairs in one loop, each view's start a min (checked on
    its pieces at every point)"""
    module = parsed(clamped_dmas_text(n))
    return lambda: copyir.verify(module)


# --------------------------------------------------------------------------
# The Pallas frontend
# --------------------------------------------------------------------------


@case("import-pallas-double-buffer", n=16384)
def _import_pallas_double_buffer(n: int) -> Stage:
    """import_kernels: the double-buffered Pallas example over N steps

    The kernel of examples/pallas/double_buffer.py, its x of 8N rows. The
    fori_loop stays one loop, the same IR at every N; what grows is the
    copy of the inputs the import keeps (numpy arrays of the JAX ones).
    N is fixed: the search for N would grow x past a gigabyte."""
    from pallas_import import example, inputs

    import copyir.pallas

    db, x = example(), inputs(n)
    return lambda: copyir.pallas.import_kernels(db.double_buffer, x)


@case("compare-dma-events", start=1024)
def _compare_dma_events(n: int) -> Stage:
    """copyir check --compare: the DMA events of a scope in a loop of N
    steps (each entry's buffer and semaphore renewed), canonical"""
    from copyir.backends.interpreter import dma_events

    from copyir.pallas.interpret_side import canonical

    stream = copyir.to_stream(copyir.lower(scope_loop_text(n)))
    return lambda: canonical(dma_events(stream))


# --------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------

TARGET = 2.3
MAX_N = 1 << 22


def seconds(case: Case, n: int, repeat: int) -> float:
    """The best of `repeat` runs of the case's stage at size n, in CPU
    seconds, the collector's included (`measure.paid`)."""
    return min(paid(case.prepare(n))[0].cpu for _ in range(repeat))


def choose_n(case: Case, at_least: float) -> int:
    """The case's N: doubled until the 8N run takes `at_least` seconds."""
    if case.n is not None:
        return case.n
    n = case.start
    while n < MAX_N and seconds(case, 8 * n, 1) < at_least:
        n *= 2
    return n


def report(case: Case, at_least: float, repeat: int) -> list[float]:
    n = choose_n(case, at_least)
    times = [seconds(case, n << k, repeat) for k in range(4)]
    ratios = [b / a for a, b in itertools.pairwise(times)]
    verdict = "ok" if max(ratios) <= TARGET else "OVER"
    print(
        f"{case.name:<28} {n:>7,}  "
        + "  ".join(f"{t:8.3f}" for t in times)
        + "   "
        + " ".join(f"{r:4.2f}" for r in ratios)
        + f"  {verdict}",
        flush=True,
    )
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="cases to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the cases")
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="least time of the 8N run"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per size")
    args = parser.parse_args()
    if args.list:
        for name, c in CASES.items():
            print(f"{name:<28} {c.description}")
        return
    unknown = [name for name in args.cases if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    chosen = [CASES[name] for name in args.cases or CASES]
    print(
        f"CPU seconds at N, 2N, 4N, 8N; ratio per doubling "
        f"(2.0 linear, 4.0 quadratic; target <= {TARGET})"
    )
    print(f"{'case':<28} {'N':>7}  {'N':>8}  {'2N':>8}  {'4N':>8}  {'8N':>8}   ratios")
    worst = max(max(report(c, args.seconds, args.repeat)) for c in chosen)
    print(f"worst ratio per doubling: {worst:.2f} (target <= {TARGET})")


if __name__ == "__main__":
    main()
