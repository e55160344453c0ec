"""Parse + verify throughput on a generated 10,000-statement program.

    python benchmarks/parse_verify.py [--statements N] [--repeat R]

Prints statements per second for parsing (authoring syntax and MLIR form),
for verifying, and for both, with lark's bare LALR parse of the same text
as the baseline measured in the same run (the floor for any lark-based
front end). Target: parse + verify of the authoring syntax at >= 5,000
statements per second on a 2-core machine, for `copyir.verify(text)` as
one call, printed beside the parts; then `copyir verify FILE` as a process
against the call plus the start-up of the same command on a 4-statement
program. Best of R runs; every time includes the garbage collector's (see
measure.py).
"""

from __future__ import annotations

import argparse

from measure import timed, versus_command

import copyir
from copyir.cpy.syntax import lark_parser

BODY = [
    "copy_start x[{i8}:{i8e}, :] -> buf[{j}], sems[{s}]",
    "copy_wait x[{i8}:{i8e}, :] -> buf[{j}], sems[{s}]",
    "sync_copy (x[{i8}:{i8e}], {{a: y[{i8}:{i8e}]}}) -> (buf[{j}], {{a: buf[{k}]}})",
    "buffered_copy x -> bx[{b}, {c}], slot={s}",
    "buffered_copy bx[{b}, {c}] -> y, slot={s}",
]


def program(statements: int) -> str:
    """One kernel with `statements` statements, cycling through the op kinds."""
    lines = [
        "kernel bench(x: f32[1000, 384] @hbm, y: f32[1000, 384] @hbm) {",
        "  buf = alloc f32[4, 8, 384] @vmem",
        "  sems = semaphore[2]",
        "  bx = buffered_ref x, block=(128, 128), buffers=2",
    ]
    for n in range(statements - 3):
        i = n % 120
        fields = dict(
            i8=8 * i, i8e=8 * i + 8, j=n % 4, k=(n + 1) % 4, s=n % 2, b=n % 8, c=n % 3
        )
        lines.append("  " + BODY[n % len(BODY)].format(**fields))
    lines.append("}")
    return "\n".join(lines) + "\n"


def best_of(repeat: int, fn) -> tuple[float, object]:
    """The best of `repeat` calls, each as `measure.timed` counts it."""
    best, result = float("inf"), None
    for _ in range(repeat):
        seconds, result = timed(fn)
        best = min(best, seconds)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--statements", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.statements
    text = program(n)
    lark_time, _ = best_of(args.repeat, lambda: lark_parser().parse(text))
    parse_time, module = best_of(args.repeat, lambda: copyir.parse(text, "bench.cpy"))
    verify_time, _ = best_of(args.repeat, lambda: copyir.verify(module))
    mlir = copyir.to_text(module, "mlir")
    mlir_time, _ = best_of(args.repeat, lambda: copyir.parse(mlir, "bench.mlir"))
    ops = sum(1 for _ in module.walk())
    one_call, _ = best_of(args.repeat, lambda: copyir.verify(text))

    def rate(seconds: float) -> str:
        return f"{n / seconds:>9,.0f} statements/s"

    print(f"program: {n:,} statements, {ops:,} ops, {len(text):,} bytes")
    print(f"lark LALR alone (baseline): {lark_time:7.3f} s  {rate(lark_time)}")
    print(
        f"parse (authoring syntax):   {parse_time:7.3f} s  {rate(parse_time)}"
        f"  ({lark_time / parse_time:.2f}x the baseline's rate)"
    )
    print(f"parse (MLIR form):          {mlir_time:7.3f} s  {rate(mlir_time)}")
    print(f"verify:                     {verify_time:7.3f} s  {rate(verify_time)}")
    total = parse_time + verify_time
    print(f"parse + verify, the sum:    {total:7.3f} s  {rate(total)}")
    met = "met" if n / one_call >= 5000 else "NOT met"
    print(
        f"copyir.verify(text), one call: {one_call:7.3f} s  {rate(one_call)}"
        f"  (target >= 5,000 statements/s: {met})"
    )
    print("as a user pays it, the command line:")
    for line in versus_command(text, program(4), command="verify").lines():
        print(f"  {line}")


if __name__ == "__main__":
    main()
