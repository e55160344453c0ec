"""The last block clamped, as Pallas kernels write it when the block size
does not divide the array: 100 rows in blocks of 16, block i starting at
`jnp.minimum(i * 16, 100 - 16)`, so the last block is rows 84:100 and
overlaps the one before it, every block full (no ragged edge, no padding).

Double-buffered by hand, as `double_buffer.py`: step i prefetches block
i + 1 into the other slot, waits for block i, doubles it and writes it
back. copyir imports each `jnp.minimum` as a `min` index and checks every
DMA exactly on both of its pieces (`16 * i` where `16 * i <= 84`, 84
elsewhere).

    copyir check examples/pallas/clamped_blocks.py --call main --compare
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS, BLOCK = 100, 16
STEPS = -(-ROWS // BLOCK)  # 7 blocks, the last one clamped


def start_of(i):
    """Block i's first row: clamped so that the block ends at the array's."""
    return jnp.minimum(i * BLOCK, ROWS - BLOCK)


def clamped_kernel(x_hbm, y_hbm, buf, in_sems, out_sems):
    def fetch(i, slot):
        return pltpu.make_async_copy(
            x_hbm.at[pl.ds(start_of(i), BLOCK)], buf.at[slot], in_sems.at[slot]
        )

    fetch(0, 0).start()

    def step(i, carry):
        slot = i % 2

        @pl.when(i + 1 < STEPS)
        def _prefetch():
            fetch(i + 1, (i + 1) % 2).start()

        fetch(i, slot).wait()
        buf[slot] = buf[slot] * 2.0
        out = pltpu.make_async_copy(
            buf.at[slot], y_hbm.at[pl.ds(start_of(i), BLOCK)], out_sems.at[slot]
        )
        out.start()
        out.wait()
        return carry

    jax.lax.fori_loop(0, STEPS, step, 0)


def clamped(x, interpret=False):
    """2 * x for x of shape (100, 128)."""
    return pl.pallas_call(
        clamped_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[
            pltpu.VMEM((2, BLOCK, 128), jnp.float32),
            pltpu.SemaphoreType.DMA((2,)),
            pltpu.SemaphoreType.DMA((2,)),
        ],
        interpret=interpret,
    )(x)


def main():
    x = jnp.arange(ROWS * 128, dtype=jnp.float32).reshape(ROWS, 128)
    return clamped(x)
