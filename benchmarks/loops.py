"""Loops kept as loops: lowering, stream size, checking and running at scale.

    python benchmarks/loops.py [--n N] [--small S] [--ring R]

Prints, from one run:

1. The double-buffered loop of the README (blocks of (8, 128) f32, an
   (8N, 128) f32 array in and out) for S = 2,000 and N = 200,000
   iterations: lowering time (parse to the stream's tables) and the
   stream's size (instructions, .dma text, .npz), which must not grow with
   N; then, for N, check (compile) and execute times, against (a) one
   `np.copyto` of the whole array and (b) a plain numpy loop of the same 2N
   `np.copyto` calls on views sliced inside the loop, as a user would write
   it (both writing a freshly allocated output, as a run does); and the
   peak memory of a run beyond its arrays, measured in a subprocess of its
   own. Targets: the stream for N no larger than for S; run (check +
   execute) within 3x of (b); peak memory at most the arrays plus 256 MiB.
2. Two variants at N: three slots with `% 3` semaphores and a `when`, and a
   mutant wrong only at its last iteration (it must be reported at
   `i = N - 1`).
3. The same copies unrolled: a generated ring of R = 10,000 start/wait
   pairs through 16 VMEM slots, no loop, end to end through `copyir.run`'s
   stages (parse, verify, lower, check, execute) per DMA. Target: at most
   0.5 ms per DMA.

For scale: Pallas' TPU interpret mode needs about 0.65 ms per DMA on this
machine, about 4 minutes for the 400,000 DMAs of N = 200,000.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import resource
import subprocess
import sys
import time

import numpy as np

BLOCK = (8, 128)


def double_buffer(n: int) -> str:
    return f"""kernel double_buffer(x: f32[{8 * n}, 128] @hbm,
                     y: f32[{8 * n}, 128] @hbm) {{
  buf = alloc f32[2, 8, 128] @vmem
  sems = semaphore[2]
  out = semaphore[2]
  copy_start x[ds(0, 8)] -> buf[0], sems[0]
  for i in range({n}) {{
    slot = i % 2
    when i + 1 < {n} {{
      copy_start x[ds(8 * (i + 1), 8)] -> buf[(i + 1) % 2], sems[(i + 1) % 2]
    }}
    c = async_copy x[ds(8 * i, 8)] -> buf[slot], sems[slot]
    c.wait()
    copy_start buf[slot] -> y[ds(8 * i, 8)], out[slot]
    copy_wait buf[slot] -> y[ds(8 * i, 8)], out[slot]
  }}
}}
"""


def three_slots(n: int) -> str:
    return f"""kernel three_slots(x: f32[{8 * n}, 128] @hbm,
                   y: f32[{8 * n}, 128] @hbm) {{
  buf = alloc f32[3, 8, 128] @vmem
  sems = semaphore[3]
  out = semaphore[3]
  copy_start x[ds(0, 8)] -> buf[0], sems[0]
  copy_start x[ds(8, 8)] -> buf[1], sems[1]
  for i in range({n}) {{
    when i + 2 < {n} {{
      copy_start x[ds(8 * (i + 2), 8)] -> buf[(i + 2) % 3], sems[(i + 2) % 3]
    }}
    copy_wait x[ds(8 * i, 8)] -> buf[i % 3], sems[i % 3]
    copy_start buf[i % 3] -> y[ds(8 * i, 8)], out[i % 3]
    copy_wait buf[i % 3] -> y[ds(8 * i, 8)], out[i % 3]
  }}
}}
"""


def last_iteration_mutant(n: int) -> str:
    """The double buffer whose last write-back is never waited."""
    return double_buffer(n).replace(
        "    copy_wait buf[slot] -> y[ds(8 * i, 8)], out[slot]\n",
        f"    when i < {n - 1} {{\n"
        "      copy_wait buf[slot] -> y[ds(8 * i, 8)], out[slot]\n    }\n",
    )


def ring(count: int) -> str:
    lines = [
        f"kernel ring(x: f32[{count}, 8, 128] @hbm) {{",
        "  buf = alloc f32[16, 8, 128] @vmem",
        "  s = semaphore[16]",
    ]
    for i in range(count):
        lines.append(f"  copy_start x[{i}] -> buf[{i % 16}], s[{i % 16}]")
        lines.append(f"  copy_wait x[{i}] -> buf[{i % 16}], s[{i % 16}]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def timed(fn):
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def lowered(text: str, name: str):
    import copyir

    seconds, program = timed(lambda: copyir.lower(text, in_place=True))
    stream = copyir.to_stream(program)
    return seconds, program, stream


def stream_size(program, stream) -> str:
    import copyir
    from copyir.stream import save_npz

    data = io.BytesIO()
    save_npz(stream, data)
    text = copyir.dma_text(program)
    return (
        f"{len(stream.instructions)} instructions, {len(text):,} bytes of text, "
        f"{len(data.getvalue()):,} bytes npz"
    )


def fresh_input(rows: int) -> np.ndarray:
    """An input array filled in place (no temporary as large as itself)."""
    x = np.empty((rows, 128), np.float32)
    for start in range(0, rows, 1 << 16):
        stop = min(rows, start + (1 << 16))
        x[start:stop] = np.arange(start, stop, dtype=np.float32)[:, None]
    return x


def baseline(kind: str, n: int) -> float:
    """One baseline's time, writing a freshly allocated output as a run
    does: (a) one np.copyto, (b) the numpy loop of 2n copies on views."""
    x = fresh_input(8 * n)
    if kind == "a":
        return timed(lambda: np.copyto(np.empty_like(x), x))[0]

    def loop():
        y = np.empty_like(x)
        buf = np.empty((2, 8, 128), np.float32)
        for i in range(n):
            slot = i % 2
            np.copyto(buf[slot], x[8 * i : 8 * i + 8])
            np.copyto(y[8 * i : 8 * i + 8], buf[slot])
        return y

    return timed(loop)[0]


REPEAT = 3


def in_subprocess(*args: str) -> dict:
    """A measurement in processes of its own (its memory, its first touch of
    fresh pages, which is slow and noisy here, nothing left over from other
    measurements): the best of REPEAT runs, each figure taken at its least."""
    best: dict = {}
    for _ in range(REPEAT):
        result = subprocess.run(
            [sys.executable, __file__, *args],
            capture_output=True,
            text=True,
            check=True,
        )
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        for key, value in figures.items():
            best[key] = min(best.get(key, value), value)
    return best


def run_figures(n: int) -> dict:
    """Check and execute the double buffer at n, in this process (the
    subprocess of `--child`): times, and peak memory beyond the arrays."""
    from copyir.backends.interpreter import Executable

    x = fresh_input(8 * n)
    _, _, stream = lowered(double_buffer(n), "db.cpy")
    gc.collect()
    check, program = timed(lambda: Executable(stream, {"x"}, "random", 0))
    execute, out = timed(lambda: program.run({"x": x}))
    # The peak before the comparison, whose temporary is not the run's.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert np.array_equal(out["y"], x)
    arrays = x.nbytes + out["y"].nbytes
    return {"check": check, "execute": execute, "peak": peak, "arrays": arrays}


def child(n: int) -> None:
    print(json.dumps(run_figures(n)))


def warm_up() -> None:
    """Imports and the grammar, once, outside every figure."""
    import copyir

    copyir.run(double_buffer(2), {"x": fresh_input(16)})


def part_one(small: int, n: int) -> None:
    print("1. The double-buffered loop")
    for count in (small, n):
        seconds, program, stream = lowered(double_buffer(count), "db.cpy")
        size = stream_size(program, stream)
        print(f"   N = {count:,}: lowering {seconds:.3f} s; stream: {size}")
    figures = in_subprocess("--child", str(n))
    a = in_subprocess("--baseline", "a", str(n))["seconds"]
    b = in_subprocess("--baseline", "b", str(n))["seconds"]
    run = figures["check"] + figures["execute"]
    beyond = (figures["peak"] - figures["arrays"]) / 2**20
    print(
        f"   N = {n:,} ({2 * n:,} DMAs): check {figures['check']:.2f} s + execute "
        f"{figures['execute']:.2f} s = {run:.2f} s; (a) one np.copyto {a:.3f} s, "
        f"(b) the numpy loop {b:.2f} s: {run / b:.2f}x (b) (target <= 3x)"
    )
    print(
        f"   peak memory {figures['peak'] / 2**20:,.0f} MiB: the arrays "
        f"{figures['arrays'] / 2**20:,.0f} MiB + {beyond:,.0f} MiB (target <= 256 MiB)"
    )


def part_two(n: int) -> None:
    from copyir.backends.interpreter import Executable

    import copyir
    from copyir.errors import CopyIRError

    print("2. Variants")
    x = fresh_input(8 * n)
    seconds, _, stream = lowered(three_slots(n), "three.cpy")
    run, out = timed(lambda: Executable(stream, {"x"}, "random", 0).run({"x": x}))
    assert np.array_equal(out["y"], x)
    print(f"   three slots, % 3 semaphores: lowering {seconds:.3f} s, run {run:.2f} s")
    del out
    _, _, stream = lowered(last_iteration_mutant(n), "mutant.cpy")
    start = time.perf_counter()
    try:
        copyir.run(stream, {"x": x})
        verdict = "NOT REPORTED"
    except CopyIRError as err:
        verdict = str(err)
    seconds = time.perf_counter() - start
    print(f"   mutant wrong only at its last iteration ({seconds:.2f} s):")
    print(f"     {verdict}")


def part_three(count: int) -> None:
    from copyir.backends.interpreter import Executable

    import copyir

    print("3. The same copies unrolled")
    text = ring(count)
    x = fresh_input(8 * count).reshape(count, 8, 128)
    parse, module = timed(lambda: copyir.parse(text, "ring.cpy"))
    verify, _ = timed(lambda: copyir.verify(module))
    lower, program = timed(lambda: copyir.lower(module, in_place=True))
    tables, stream = timed(lambda: copyir.to_stream(program))
    check, compiled = timed(lambda: Executable(stream, {"x"}, "random", 0))
    execute, _ = timed(lambda: compiled.run({"x": x}))
    # copyir.lower verifies again; count verify once, as copyir.run does.
    total = parse + lower + tables + check + execute
    print(
        f"   {count:,} DMAs: parse {parse:.2f} s, verify {verify:.2f} s, lower "
        f"{lower - verify:.2f} s, tables {tables:.2f} s, check {check:.2f} s, "
        f"execute {execute:.2f} s"
    )
    print(
        f"   end to end {total:.2f} s = {total / count * 1e3:.3f} ms per DMA "
        "(target <= 0.5 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--small", type=int, default=2_000)
    parser.add_argument("--ring", type=int, default=10_000)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--baseline", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    if args.baseline:
        kind, n = args.baseline
        print(json.dumps({"seconds": baseline(kind, int(n))}))
        return
    warm_up()
    part_one(args.small, args.n)
    part_two(args.n)
    part_three(args.ring)


if __name__ == "__main__":
    main()
