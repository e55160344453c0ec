"""A grid with BlockSpecs: Pallas moves the blocks, the kernel only computes.

The call runs the kernel once per point (i, j) of a (4, 2) grid. Each
BlockSpec says which (8, 128) block of an operand the kernel sees at that
point (its index map), and Pallas' pipeline fetches the blocks of the next
point while the kernel computes on this one. `x` asks for three buffers
(`pipeline_mode=pl.Buffered(3)`: two blocks fetched ahead instead of one);
`dimension_semantics` says the rows (i) may run in parallel, the columns
(j) in order. copyir imports the call as a `copy.pipeline`, expands it into
the DMAs of Pallas' schedule and checks them like any other.

    copyir check examples/pallas/grid_blockspec.py --call main
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

GRID = (4, 2)
BLOCK = (8, 128)


def scale_add_kernel(x_ref, y_ref, o_ref):
    # Elementwise on the blocks of this grid point: o = 2x + y - 1.
    o_ref[...] = x_ref[...] * 2.0 + y_ref[...] - 1.0


def block(**options):
    """The BlockSpec of block (i, j) of an (8 * 4, 128 * 2) array."""
    return pl.BlockSpec(BLOCK, lambda i, j: (i, j), **options)


def scale_add(x, y, interpret=False):
    """2x + y - 1 (`interpret` as for pallas_call)."""
    return pl.pallas_call(
        scale_add_kernel,
        grid=GRID,
        in_specs=[block(pipeline_mode=pl.Buffered(3)), block()],
        out_specs=block(),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary")
        ),
        interpret=interpret,
    )(x, y)


def main():
    shape = (GRID[0] * BLOCK[0], GRID[1] * BLOCK[1])
    x = jnp.arange(shape[0] * shape[1], dtype=jnp.float32).reshape(shape)
    y = jnp.full(shape, 0.5, jnp.float32)
    return scale_add(x, y)
