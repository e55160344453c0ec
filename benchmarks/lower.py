"""Lowering rate on a generated program of 10,000 buffered_copy statements.

    python benchmarks/lower.py [--statements N]

Prints the time of each stage (parse, verify, each pass, building the
stream's tables, writing the text and binary forms), the end-to-end rate in
buffered_copy statements per second, and the stream's size in instructions
and bytes, text and binary. Target: at least 2,000 buffered_copy statements
per second end to end (parse to tables) on a 2-core machine. The baseline
measured in the same run is the parse + verify of the same program, the
floor of any lowering. Then what a user pays for the whole: `copyir.lower`
and `copyir.dma_text` as one call, and `copyir lower FILE -o OUT.dma` as a
process against the call plus the start-up of the same command on a
2-statement program. Every time includes the garbage collector's (see
measure.py); the stages are beside the whole, not instead of it.
"""

from __future__ import annotations

import argparse
import io

from measure import timed, versus_command

import copyir
from copyir.api import apply_passes, pipeline
from copyir.stream import print_dma, save_npz


def program(statements: int) -> str:
    """One kernel: blocks of a (1000, 4096) array copied in and out through a
    double-buffered window of (128, 512) blocks, ragged last row included."""
    lines = [
        "kernel bench(x: f32[1000, 4096] @hbm, y: f32[1000, 4096] @hbm) {",
        "  bx = buffered_ref x, block=(128, 512), buffers=2",
    ]
    grid = [(i, j) for i in range(8) for j in range(8)]
    for n in range(statements):
        i, j = grid[(n // 2) % len(grid)]
        slot = (n // 2) % 2
        if n % 2 == 0:
            lines.append(f"  buffered_copy x -> bx[{i}, {j}], slot={slot}")
        else:
            lines.append(f"  buffered_copy bx[{i}, {j}] -> y, slot={slot}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--statements", type=int, default=10_000)
    args = parser.parse_args()
    n = args.statements
    text = program(n)
    stages = []
    seconds, module = timed(lambda: copyir.parse(text, "bench.cpy"))
    stages.append(("parse", seconds))
    seconds, _ = timed(lambda: copyir.verify(module))
    stages.append(("verify", seconds))
    for module_pass in pipeline():
        seconds, _ = timed(lambda p=module_pass: apply_passes(module, [p]))
        stages.append((module_pass.name, seconds))
    program_op = module.ops.first
    seconds, stream = timed(lambda: copyir.to_stream(program_op))
    stages.append(("stream tables", seconds))
    total = sum(s for _, s in stages)
    baseline = stages[0][1] + stages[1][1]
    text_seconds, dma_text = timed(lambda: print_dma(program_op))
    binary = io.BytesIO()
    npz_seconds, _ = timed(lambda: save_npz(stream, binary))

    for name, seconds in stages:
        print(f"  {name:<22} {seconds:7.3f} s")
    print(
        f"end to end (parse to tables): {total:.3f} s, "
        f"{n / total:,.0f} buffered_copy statements/s "
        f"(target >= 2,000: {'met' if n / total >= 2000 else 'NOT met'})"
    )
    print(
        f"baseline, parse + verify alone: {baseline:.3f} s "
        f"({baseline / total:.2f} of the end-to-end time)"
    )
    print(
        f"stream: {len(stream.instructions):,} instructions "
        f"({(stream.instructions['op'] == 0).sum():,} starts), "
        f"{len(stream.buffers)} buffers, {stream.semaphores:,} semaphores"
    )
    print(f"  text: {len(dma_text.encode()):,} bytes, written in {text_seconds:.3f} s")
    print(f"  npz:  {len(binary.getvalue()):,} bytes, written in {npz_seconds:.3f} s")
    print("as a user pays it, the .dma text of the program:")
    for line in versus_command(text, program(2), command="lower").lines():
        print(f"  {line}")


if __name__ == "__main__":
    main()
