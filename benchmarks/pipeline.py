"""A 200,000-step pipeline: lowering, stream size, checking and running.

    python benchmarks/pipeline.py [--steps N] [--small S]

Prints, from one run:

1. `copy.pipeline` over grid (N,) streaming an (8N, 128) f32 array through
   (8, 128) blocks, 2 buffers in and 2 out, into an output of the same
   shape (2N DMAs; the body copies the input window to the output window):
   lowering time (parse to the stream's tables) and the stream's size for
   S = 2,000 and N = 200,000 steps, which must not grow with N.
2. For N: check (compile) and execute times, against (a) one `np.copyto` of
   the array and (b) a numpy loop of the same 2N `np.copyto` calls on views
   (each block into a slot of a (2, 8, 128) buffer, the slot into the
   output), both writing a freshly allocated output as a run does; and the
   peak memory of a run beyond its arrays. Each is measured in processes of
   their own, the best of 3. Targets: run (check + execute) within 3x of
   (b); peak memory at most the arrays plus 256 MiB.
3. For N, what a user pays: `copyir.run(text)` as one call, and `copyir
   run` as a process (inputs zeros) against the call plus the start-up of
   the same command on a 2-step pipeline.
4. Three inputs with 4, 2 and 3 buffers (a step-major prologue, fetches 3,
   1 and 2 steps ahead) and an output with 2, over grid (N,), the body
   y = a + b + c: check and execute against (c) the numpy loop of its
   copies (each input block into its slot of a (4|2|3, 8, 128) buffer, the
   sum into an output slot, the slot into y), each in processes of their
   own. Target: within 3x of (c).

Every time includes the garbage collector's (see measure.py).

For scale: Pallas' TPU interpret mode needs about four minutes for the
same 400,000 DMAs on this machine.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from measure import (
    fresh_input,
    in_subprocess,
    peak_bytes,
    stream_size,
    timed,
    versus_command,
)


def pipeline(steps: int) -> str:
    ref = f"!copy.ref<{8 * steps}x128xf32, hbm>"
    window = "!copy.ref<8x128xf32, vmem>"
    spec = f"{ref} block [8, 128] index affine_map<(d0) -> (d0, 0)> buffers 2"
    return f"""copy.kernel @stream(%x: {ref}, %y: {ref}) {{
  copy.pipeline grid({steps}) in %x : {spec}, out %y : {spec} (%xw, %yw, %i) {{
    copy.compute %yw (%xw) : {window}, {window} {{
    ^bb0(%element: f32):
      scalar.yield %element : f32
    }}
  }}
}}
"""


INPUT_BUFFERS = {"a": 4, "b": 2, "c": 3}


def three_inputs(steps: int) -> str:
    """Section 4's pipeline, in the authoring syntax."""
    array = f"f32[{8 * steps}, 128] @hbm"
    params = ", ".join(f"{name}: {array}" for name in [*INPUT_BUFFERS, "y"])
    specs = "\n".join(
        f"      in  {name} block=(8, 128) index=(i) -> (i, 0) buffers={count}"
        for name, count in INPUT_BUFFERS.items()
    )
    return f"""kernel three({params}) {{
  pipeline grid=({steps},)
{specs}
      out y block=(8, 128) index=(i) -> (i, 0)
      (aw, bw, cw, yw) {{
    yw[...] = aw + bw + cw
  }}
}}
"""


def lowered(steps: int, text=None):
    import copyir

    def lower():
        program = copyir.lower(text or pipeline(steps), in_place=True)
        return program, copyir.to_stream(program)

    seconds, (program, stream) = timed(lower)
    return seconds, program, stream


def run_figures(steps: int) -> dict:
    """Check and execute at `steps`, in this process (a subprocess of
    `--child`): times, and peak memory beyond the arrays."""
    from copyir.backends.interpreter import Executable

    x = fresh_input(8 * steps)
    _, _, stream = lowered(steps)
    check, program = timed(lambda: Executable(stream, {"x"}, "random", 0))
    execute, out = timed(lambda: program.run({"x": x}))
    peak = peak_bytes()  # before the comparison, whose temporary is not the run's
    assert np.array_equal(out["y"], x)
    arrays = x.nbytes + out["y"].nbytes
    return {"check": check, "execute": execute, "peak": peak, "arrays": arrays}


def three_figures(steps: int) -> dict:
    """Section 4's check and execute at `steps`, in this process."""
    from copyir.backends.interpreter import Executable

    inputs = {name: fresh_input(8 * steps) for name in INPUT_BUFFERS}
    _, _, stream = lowered(steps, three_inputs(steps))
    check, program = timed(lambda: Executable(stream, set(inputs), "random", 0))
    execute, out = timed(lambda: program.run(inputs))
    a, b, c = inputs.values()
    assert np.array_equal(out["y"], a + b + c)
    return {"check": check, "execute": execute}


def three_baseline(steps: int) -> float:
    """(c): the numpy loop of section 4's copies and sums."""
    inputs = {name: fresh_input(8 * steps) for name in INPUT_BUFFERS}

    def loop():
        y = np.empty_like(inputs["a"])
        slots = {n: np.empty((k, 8, 128), np.float32) for n, k in INPUT_BUFFERS.items()}
        out = np.empty((2, 8, 128), np.float32)
        for i in range(steps):
            rows = slice(8 * i, 8 * i + 8)
            for name, count in INPUT_BUFFERS.items():
                np.copyto(slots[name][i % count], inputs[name][rows])
            a, b, c = (slots[n][i % k] for n, k in INPUT_BUFFERS.items())
            np.add(a, b, out=out[i % 2])
            np.add(out[i % 2], c, out=out[i % 2])
            np.copyto(y[rows], out[i % 2])
        return y

    return timed(loop)[0]


def baseline(kind: str, steps: int) -> float:
    if kind == "c":
        return three_baseline(steps)
    x = fresh_input(8 * steps)
    if kind == "a":
        return timed(lambda: np.copyto(np.empty_like(x), x))[0]

    def loop():
        y = np.empty_like(x)
        buf = np.empty((2, 8, 128), np.float32)
        for i in range(steps):
            slot = i % 2
            np.copyto(buf[slot], x[8 * i : 8 * i + 8])
            np.copyto(y[8 * i : 8 * i + 8], buf[slot])
        return y

    return timed(loop)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--small", type=int, default=2_000)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--three", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--baseline", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_figures(args.child)))
        return
    if args.three:
        print(json.dumps(three_figures(args.three)))
        return
    if args.baseline:
        kind, steps = args.baseline
        print(json.dumps({"seconds": baseline(kind, int(steps))}))
        return
    lowered(2)  # imports and the dialects, outside every figure
    print("1. Lowering")
    for steps in (args.small, args.steps):
        seconds, program, stream = lowered(steps)
        print(
            f"   {steps:,} steps: lowering {seconds:.3f} s; stream: "
            f"{stream_size(program, stream)}"
        )
    n = args.steps
    figures = in_subprocess(__file__, "--child", str(n))
    a = in_subprocess(__file__, "--baseline", "a", str(n))["seconds"]
    b = in_subprocess(__file__, "--baseline", "b", str(n))["seconds"]
    run = figures["check"] + figures["execute"]
    beyond = (figures["peak"] - figures["arrays"]) / 2**20
    print(f"2. Running {n:,} steps ({2 * n:,} DMAs)")
    print(
        f"   check {figures['check']:.2f} s + execute {figures['execute']:.2f} s = "
        f"{run:.2f} s; (a) one np.copyto {a:.3f} s, (b) the numpy loop {b:.2f} s: "
        f"{run / b:.2f}x (b) (target <= 3x)"
    )
    print(
        f"   peak memory {figures['peak'] / 2**20:,.0f} MiB: the arrays "
        f"{figures['arrays'] / 2**20:,.0f} MiB + {beyond:,.0f} MiB "
        "(target <= 256 MiB)"
    )
    print(f"3. {n:,} steps as a user pays them (lowering, check and execute)")
    zeros = {name: np.zeros((8 * n, 128), np.float32) for name in "xy"}
    versus = versus_command(pipeline(n), pipeline(2), zeros, suffix=".mlir")
    for line in versus.lines():
        print(f"   {line}")
    three = in_subprocess(__file__, "--three", str(n))
    c = in_subprocess(__file__, "--baseline", "c", str(n))["seconds"]
    run = three["check"] + three["execute"]
    print(f"4. Three inputs (4, 2 and 3 buffers), {n:,} steps ({4 * n:,} DMAs)")
    print(
        f"   check {three['check']:.2f} s + execute {three['execute']:.2f} s = "
        f"{run:.2f} s; (c) the numpy loop {c:.2f} s: {run / c:.2f}x (c) "
        "(target <= 3x)"
    )


if __name__ == "__main__":
    main()
