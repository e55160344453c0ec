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
   pairs through 16 VMEM slots, no loop, end to end: `copyir.run(text)` as
   one call, CPU per DMA (target: at most 0.5 ms), then `copyir run` as a
   process against the call plus start-up, then each stage (parse,
   verify, lower, tables, check, execute) timed on its own beside the
   total.

Every figure is what a user pays (see measure.py): one call with the
garbage collector on, the collection of what it leaves included, its
share printed beside; the command line as a process. Part 1 also runs the
loop at N both ways: `copyir.run` as one call and `copyir run` as a
process (inputs zeros, `--fill-inputs zeros`).

For scale: Pallas' TPU interpret mode needs about 0.65 ms per DMA on this
machine, about 4 minutes for the 400,000 DMAs of N = 200,000.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from measure import (
    Paid,
    fresh_input,
    in_subprocess,
    paid,
    peak_bytes,
    stream_size,
    timed,
    versus_command,
)

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


def lowered(text: str, name: str):
    import copyir

    seconds, program = timed(lambda: copyir.lower(text, in_place=True))
    stream = copyir.to_stream(program)
    return seconds, program, stream


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


def run_figures(n: int) -> dict:
    """Check and execute the double buffer at n, in this process (the
    subprocess of `--child`): times, and peak memory beyond the arrays."""
    from copyir.backends.interpreter import Executable

    x = fresh_input(8 * n)
    _, _, stream = lowered(double_buffer(n), "db.cpy")
    check, program = timed(lambda: Executable(stream, {"x"}, "random", 0))
    execute, out = timed(lambda: program.run({"x": x}))
    peak = peak_bytes()  # before the comparison, whose temporary is not the run's
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
    figures = in_subprocess(__file__, "--child", str(n))
    a = in_subprocess(__file__, "--baseline", "a", str(n))["seconds"]
    b = in_subprocess(__file__, "--baseline", "b", str(n))["seconds"]
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
    print(f"   N = {n:,} as a user pays it (lowering, check and execute):")
    zeros = {name: np.zeros((8 * n, 128), np.float32) for name in "xy"}
    for line in versus_command(double_buffer(n), double_buffer(2), zeros).lines():
        print(f"     {line}")


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

    def report() -> str:
        try:
            copyir.run(stream, {"x": x})
        except CopyIRError as err:
            return str(err)
        return "NOT REPORTED"

    seconds, verdict = timed(report)
    print(f"   mutant wrong only at its last iteration ({seconds:.2f} s):")
    print(f"     {verdict}")


def part_three(count: int) -> None:
    from copyir.backends.interpreter import Executable

    import copyir

    print("3. The same copies unrolled")
    text = ring(count)
    x = np.zeros((count, 8, 128), np.float32)
    versus = versus_command(text, ring(16), {"x": x})
    call = versus.call
    print(
        f"   {count:,} DMAs end to end, as a user pays them: {call.cpu:.2f} s of "
        f"CPU = {call.cpu / count * 1e3:.3f} ms per DMA (target <= 0.5 ms)"
    )
    for line in versus.lines():
        print(f"   {line}")
    phases = {}
    phases["parse"], module = paid(lambda: copyir.parse(text, "ring.cpy"))
    phases["verify"], _ = paid(lambda: copyir.verify(module))
    lower, program = paid(lambda: copyir.lower(module, in_place=True))
    phases["tables"], stream = paid(lambda: copyir.to_stream(program))
    phases["check"], compiled = paid(lambda: Executable(stream, {"x"}, "random", 0))
    phases["execute"], _ = paid(lambda: compiled.run({"x": x}))
    # copyir.lower verifies again; its passes alone are lower - verify.
    phases["lower"] = Paid(
        lower.seconds - phases["verify"].seconds,
        lower.cpu - phases["verify"].cpu,
        lower.collector - phases["verify"].collector,
    )
    total = sum(phases.values(), Paid(0.0, 0.0, 0.0))
    print(
        "   its phases one at a time, CPU (beside the total, not instead of it): "
        + ", ".join(f"{name} {cost.cpu:.2f} s" for name, cost in phases.items())
    )
    print(
        f"   sum of the phases {total.cpu:.2f} s, collector {total.collector:.2f} s "
        "of it (each phase's collection walks only what it made)"
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
