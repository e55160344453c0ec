"""Interpreter speed, against numpy doing the same copies in the same run.

    python benchmarks/interpreter.py [--dmas N] [--repeat R]

(a) Executing an already-compiled stream (compile time printed apart):
    100,000 DMAs of (8, 128) f32 from HBM into a ring of 16 VMEM slots, each
    started then waited, against a plain numpy loop of the same `np.copyto`
    calls; and 1,000 such DMAs all in flight at once, then all waited.
    Target: within 3x of the numpy loop.
(b) Bandwidth of copying a 64 MiB f32 array HBM -> VMEM -> HBM (bytes moved
    per second), against `np.copyto`'s bandwidth on the same array.
    Target: at least 0.8x.
(c) End-to-end `copyir.run(text)` of one 256 MiB HBM -> HBM copy, one call
    from the program's text to the outputs, against `x.copy()`. Target: at
    least 0.5x. Then `copyir run` on the same program as a process against
    the call plus start-up (inputs zeros).

For scale: JAX Pallas's TPU interpret mode needs about 0.65 ms per small DMA
on this machine. Times are the best of R runs, each including the garbage
collector's (see measure.py).
"""

from __future__ import annotations

import argparse

import numpy as np
from copyir.backends.interpreter import Executable
from measure import timed, versus_command

import copyir
from copyir.stream import START, WAIT, Buffer, Stream, instruction_dtype

HBM_BLOCKS = 512


def best(repeat: int, fn) -> float:
    """The best of `repeat` calls, each as `measure.timed` counts it."""
    return min(timed(fn)[0] for _ in range(repeat))


def ring_stream(count: int, slots: int, in_flight: bool) -> Stream:
    """DMAs of (8, 128) f32 blocks of x into VMEM slots, built as tables.

    One at a time (start, wait, start, wait, ...) into a ring of `slots`, or
    all in flight (every start, then every wait) into `count` distinct slots.
    """
    block = 8 * 128 * 4
    x = Buffer("x", "hbm", 0, "f32", (HBM_BLOCKS * 8, 128), True)
    ring = Buffer("ring", "vmem", 0, "f32", (slots, 8, 128), False)
    table = np.zeros(2 * count, dtype=instruction_dtype(2))
    starts = table[:count] if in_flight else table[0::2]
    waits = table[count:] if in_flight else table[1::2]
    i = np.arange(count)
    starts["op"], waits["op"] = START, WAIT
    starts["src_space"], starts["dst_space"] = 0, 1
    starts["src_address"] = (i % HBM_BLOCKS) * block
    starts["dst_address"] = (i % slots) * block
    starts["dtype"], starts["rank"] = 9, 2  # f32
    starts["shape"] = (8, 128)
    starts["src_strides"] = starts["dst_strides"] = (128, 1)
    starts["bytes"] = waits["bytes"] = block
    starts["sem"] = waits["sem"] = 0
    table["origin"] = -1
    return Stream("ring", "default", 1, [x, ring], table)


def numpy_loop(count: int, slots: int, x: np.ndarray, ring: np.ndarray) -> None:
    blocks = x.reshape(HBM_BLOCKS, 8, 128)
    for i in range(count):
        np.copyto(ring[i % slots], blocks[i % HBM_BLOCKS])


def part_a(count: int, repeat: int) -> None:
    x = np.random.default_rng(0).random((HBM_BLOCKS * 8, 128), dtype=np.float32)
    for label, n, slots, in_flight in (
        (f"{count:,} DMAs, one in flight, ring of 16", count, 16, False),
        ("1,000 DMAs all in flight, then all waited", 1000, 1000, True),
    ):
        stream = ring_stream(n, slots, in_flight)
        compile_time, program = timed(
            lambda s=stream: Executable(s, {"x"}, "random", 0)
        )
        program.run({"x": x})
        ours = best(repeat, program.execute)
        ring = np.empty((slots, 8, 128), np.float32)
        base = best(repeat, lambda n=n, s=slots, r=ring: numpy_loop(n, s, x, r))
        numpy_loop(n, slots, x, ring)
        assert np.array_equal(program.buffer("ring"), ring)
        print(
            f"(a) {label}: {ours * 1e6 / n:.2f} us per DMA executed, numpy loop "
            f"{base * 1e6 / n:.2f} us: {ours / base:.2f}x its time "
            f"(target <= 3x); compile {compile_time * 1e6 / n:.1f} us per DMA"
        )


def part_b(repeat: int) -> None:
    text = (
        "kernel bandwidth(x: f32[4096, 4096] @hbm, y: f32[4096, 4096] @hbm) {\n"
        "  buf = alloc f32[4096, 4096] @vmem\n"
        "  sync_copy x -> buf\n  sync_copy buf -> y\n}\n"
    )
    x = np.random.default_rng(1).random((4096, 4096), dtype=np.float32)
    stream = copyir.to_stream(copyir.lower(copyir.parse(text, "bandwidth.cpy")))
    program = Executable(stream, {"x"}, "random", 0)
    out = program.run({"x": x})
    assert np.array_equal(out["y"], x)
    ours = best(repeat, program.execute)
    target = np.empty_like(x)
    np.copyto(target, x)
    base = best(repeat, lambda: np.copyto(target, x))
    moved = 2 * x.nbytes
    print(
        f"(b) 64 MiB HBM -> VMEM -> HBM: {moved / ours / 2**30:.2f} GiB/s moved, "
        f"np.copyto {x.nbytes / base / 2**30:.2f} GiB/s: "
        f"{(moved / ours) / (x.nbytes / base):.2f}x its bandwidth (target >= 0.8x)"
    )


def part_c(repeat: int) -> None:
    rows = 256 * 2**20 // (4 * 4096)
    text = big_copy(rows)
    x = np.random.default_rng(2).random((rows, 4096), dtype=np.float32)
    result = {}

    def run():
        result.update(copyir.run(text, {"x": x}))

    ours = best(repeat, run)
    assert np.array_equal(result["y"], x)
    base = best(repeat, x.copy)
    print(
        f"(c) copyir.run of a 256 MiB HBM -> HBM copy, parse to outputs: "
        f"{ours * 1e3:.1f} ms, x.copy() {base * 1e3:.1f} ms: "
        f"{base / ours:.2f}x its speed (target >= 0.5x)"
    )
    zeros = {name: np.zeros((rows, 4096), np.float32) for name in "xy"}
    for line in versus_command(text, big_copy(1), zeros).lines():
        print(f"    {line}")


def big_copy(rows: int) -> str:
    """One sync_copy of an f32 (rows, 4096) array, HBM to HBM."""
    return (
        f"kernel big(x: f32[{rows}, 4096] @hbm, y: f32[{rows}, 4096] @hbm) {{\n"
        "  sync_copy x -> y\n}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dmas", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    part_a(args.dmas, args.repeat)
    part_b(args.repeat)
    part_c(args.repeat)


if __name__ == "__main__":
    main()
