"""The Pallas frontend: what checking a Pallas kernel on copyir costs a user.

    python benchmarks/pallas_import.py [--small S] [--interpret I] [--large L]

The kernel is examples/pallas/double_buffer.py: a `fori_loop` of
`make_async_copy` start/wait over N blocks of (8, 128) f32, two VMEM slots,
the next block prefetched under `pl.when`, each block doubled and written
back (2N DMAs, N computations). Prints, from one run:

(a) N = S (2,000): `copyir.pallas.run` (trace, import, lower, check, run)
    as one call, the second call of the same function (steady) with the
    first beside it, against `copyir run` of the kernel that `copyir
    import` writes (.cpy, with its inputs .npz) as a process, start-up
    included. Target: the call costs at most 2x the process.
(b) N = I (20,000): the same call against Pallas' own interpreter on the
    same kernel, `interpret=pltpu.InterpretParams()` (DMAs on wait, its
    default) and with `dma_execution_mode="eager"`, second call each
    (compiled), first beside. Target: copyir at least 20x faster than each.
(c) N = L (200,000): the stream `import_kernels` + `copyir.lower` give
    (instructions of `copyir.to_stream`) is the one of N = S: the loop stays
    a loop. Target: equal.

Every call is timed as a user pays it (see measure.py): one call, the
garbage collector on, the collection of what it leaves included. Each
ratio is taken on wall-clock seconds and on CPU seconds (the machine is
shared, and JAX runs threads of its own), and a target is met only if both
ratios meet it.
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
from pathlib import Path

import numpy as np
from measure import Paid, command_cost, copyir_command, fresh_input, paid

EXAMPLE = Path(__file__).resolve().parent.parent / "examples/pallas/double_buffer.py"
ROWS = 8
"""Rows of x per step (the example's block is (8, 128))."""


def example():
    """examples/pallas/double_buffer.py as a module."""
    spec = importlib.util.spec_from_file_location("double_buffer", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs(steps: int):
    """x of the kernel at `steps` steps, a JAX array of distinct rows."""
    import jax.numpy as jnp

    return jnp.asarray(fresh_input(ROWS * steps))


def two_calls(call) -> tuple[Paid, Paid, object]:
    """(first call, second call, the second's result), each as paid."""
    first, _ = paid(call)
    second, result = paid(call)
    return first, second, result


def ratio(slow: Paid, fast: Paid) -> tuple[float, float]:
    """slow / fast on wall-clock and on CPU seconds."""
    return slow.seconds / fast.seconds, slow.cpu / fast.cpu


def cost(paid_: Paid) -> str:
    return f"{paid_.seconds:.2f} s wall, {paid_.cpu:.2f} s CPU"


def calls(name: str, first: Paid, second: Paid) -> str:
    """A line: the second call's cost, the first's beside it."""
    return f"    {name}, second call: {cost(second)} (first call {cost(first)})"


def part_a(db, steps: int) -> None:
    import copyir
    import copyir.pallas

    print(f"(a) N = {steps:,} ({2 * steps:,} DMAs): the call against `copyir run`")
    x = inputs(steps)
    first, steady, out = two_calls(lambda: copyir.pallas.run(db.double_buffer, x))
    assert np.array_equal(np.asarray(out), 2 * np.asarray(x))
    (kernel,) = copyir.pallas.import_kernels(db.double_buffer, x)
    with tempfile.TemporaryDirectory() as folder:
        program = Path(folder, "double_buffer.cpy")
        program.write_text(copyir.to_text(kernel.module, "cpy"))
        data = Path(folder, "double_buffer.inputs.npz")
        np.savez(data, **kernel.inputs)
        command = copyir_command("run", str(program), "--input", str(data))
        process = command_cost(command)
    over = max(steady.seconds / process.seconds, steady.cpu / process.cpu)
    verdict = "met" if over <= 2 else "NOT met"
    print(calls("copyir.pallas.run", first, steady))
    print(
        f"    `copyir run` of the imported .cpy as a process: {process.seconds:.2f} s "
        f"wall, {process.cpu:.2f} s CPU"
    )
    print(
        f"    the call / the process: {steady.seconds / process.seconds:.2f}x wall, "
        f"{steady.cpu / process.cpu:.2f}x CPU (target <= 2x; {verdict})"
    )


def part_b(db, steps: int) -> None:
    import jax
    from jax.experimental.pallas import tpu as pltpu

    import copyir.pallas

    print(f"(b) N = {steps:,} ({2 * steps:,} DMAs): against Pallas' interpret mode")
    x = inputs(steps)
    want = 2 * np.asarray(x)
    first, ours, out = two_calls(lambda: copyir.pallas.run(db.double_buffer, x))
    assert np.array_equal(np.asarray(out), want)
    print(calls("copyir.pallas.run", first, ours))
    variants = {
        "InterpretParams() (DMAs on wait)": pltpu.InterpretParams(),
        'InterpretParams(dma_execution_mode="eager")': pltpu.InterpretParams(
            dma_execution_mode="eager"
        ),
    }
    for name, params in variants.items():

        def interpret(params=params):
            return jax.block_until_ready(db.double_buffer(x, interpret=params))

        first, theirs, out = two_calls(interpret)
        assert np.array_equal(np.asarray(out), want)
        wall, cpu = ratio(theirs, ours)
        verdict = "met" if min(wall, cpu) >= 20 else "NOT met"
        print(calls(name, first, theirs))
        print(
            f"      copyir faster by {wall:,.0f}x wall, {cpu:,.0f}x CPU "
            f"(target >= 20x; {verdict})"
        )


def instructions(db, steps: int) -> int:
    """Instructions of the stream the imported kernel lowers to."""
    import jax.numpy as jnp

    import copyir
    import copyir.pallas

    x = jnp.zeros((ROWS * steps, 128), jnp.float32)
    (kernel,) = copyir.pallas.import_kernels(db.double_buffer, x)
    program = copyir.lower(kernel.module, in_place=True)
    return len(copyir.to_stream(program).instructions)


def part_c(db, small: int, large: int) -> None:
    print("(c) The imported stream's size")
    sizes = {steps: instructions(db, steps) for steps in (small, large)}
    for steps, count in sizes.items():
        print(f"    N = {steps:,}: {count} instructions")
    verdict = "met" if sizes[large] == sizes[small] else "NOT met"
    print(f"    N = {large:,} as large as N = {small:,} (target: equal; {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=2_000)
    parser.add_argument("--interpret", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=200_000)
    args = parser.parse_args()
    import jax  # noqa: F401  (imports are no part of any figure)

    import copyir.pallas  # noqa: F401

    db = example()
    part_a(db, args.small)
    part_b(db, args.interpret)
    part_c(db, args.small, args.large)


if __name__ == "__main__":
    main()
