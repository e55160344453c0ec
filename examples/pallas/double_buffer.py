"""Double buffering by hand: while step i works on one VMEM slot, the DMA of
step i + 1 fills the other.

The operands stay in HBM (`memory_space=pl.ANY`): the kernel moves every
block itself with `pltpu.make_async_copy`, into a two-slot VMEM scratch
buffer with one DMA semaphore per slot. Step i

1. starts the fetch of block i + 1 into slot (i + 1) % 2, under `pl.when`
   (the last step has nothing left to fetch);
2. waits for block i, fetched into slot i % 2 by the step before (or by the
   prologue, for block 0);
3. doubles it in place and writes it back to HBM, waiting for that copy
   before the step ends: the next step refills this slot with block i + 2.

    copyir check examples/pallas/double_buffer.py --call main
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK = (8, 128)


def double_buffer_kernel(x_hbm, y_hbm, buf, in_sems, out_sems):
    steps = x_hbm.shape[0] // BLOCK[0]  # a Python int: the loop's bounds are static

    def fetch(i, slot):
        """The copy of block i into VMEM slot `slot` (not yet started)."""
        return pltpu.make_async_copy(
            x_hbm.at[pl.ds(i * BLOCK[0], BLOCK[0])], buf.at[slot], in_sems.at[slot]
        )

    fetch(0, 0).start()  # the prologue: block 0 into slot 0

    def step(i, carry):
        slot = i % 2

        @pl.when(i + 1 < steps)
        def _prefetch():
            fetch(i + 1, (i + 1) % 2).start()

        fetch(i, slot).wait()
        buf[slot] = buf[slot] * 2.0
        out = pltpu.make_async_copy(
            buf.at[slot], y_hbm.at[pl.ds(i * BLOCK[0], BLOCK[0])], out_sems.at[slot]
        )
        out.start()
        out.wait()
        return carry

    jax.lax.fori_loop(0, steps, step, 0)


def double_buffer(x, interpret=False):
    """2 * x, for x of shape (8 * steps, 128); `interpret` is pallas_call's
    (copyir ignores it and runs the kernel itself)."""
    return pl.pallas_call(
        double_buffer_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[
            pltpu.VMEM((2, *BLOCK), jnp.float32),
            pltpu.SemaphoreType.DMA((2,)),
            pltpu.SemaphoreType.DMA((2,)),
        ],
        interpret=interpret,
    )(x)


def main():
    x = jnp.arange(8 * 8 * 128, dtype=jnp.float32).reshape(64, 128)  # 8 steps
    return double_buffer(x)
