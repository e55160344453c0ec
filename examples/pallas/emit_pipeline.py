"""A pipeline inside a kernel: `pltpu.emit_pipeline`.

The call itself has no grid and leaves its operands in HBM
(`memory_space=pl.ANY`); the kernel builds the block pipeline with
`pltpu.emit_pipeline`, which takes the same grid and BlockSpecs as a
`pallas_call` would and runs its body once per grid point on VMEM windows
of the refs it is given. This is how a kernel pipelines over part of its
operands, or twice in a row, or over refs it sliced itself.

copyir reads `emit_pipeline` as one equation, which JAX makes only with
`jax_use_emit_pipeline_primitive` on (otherwise the pipeline is traced
into its loops, semaphores and conditions, which copyir does not import).

    copyir check examples/pallas/emit_pipeline.py --call main
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

jax.config.update("jax_use_emit_pipeline_primitive", True)

GRID = (4, 2)
BLOCK = (8, 128)


def add_one(x_window, y_window):
    """The body, at each grid point: the windows of this point's blocks."""
    y_window[...] = x_window[...] + 1.0


def plus_one_kernel(x_hbm, y_hbm):
    spec = pl.BlockSpec(BLOCK, lambda i, j: (i, j))
    pipeline = pltpu.emit_pipeline(
        add_one, grid=GRID, in_specs=[spec], out_specs=[spec]
    )
    pipeline(x_hbm, y_hbm)


def plus_one(x, interpret=False):
    """x + 1 (`interpret` as for pallas_call; Pallas' interpret mode of
    jax 0.10.2 runs no `emit_pipeline` on the CPU, copyir does)."""
    return pl.pallas_call(
        plus_one_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        interpret=interpret,
    )(x)


def main():
    shape = (GRID[0] * BLOCK[0], GRID[1] * BLOCK[1])
    x = jnp.arange(shape[0] * shape[1], dtype=jnp.float32).reshape(shape)
    return plus_one(x)
