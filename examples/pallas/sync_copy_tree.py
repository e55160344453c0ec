"""`pltpu.sync_copy`: a blocking copy, of one ref or of a pytree of refs.

`sync_copy(src, dst)` allocates a DMA semaphore for the copy
(`pl.run_scoped`), starts one DMA per leaf of the two pytrees (which must
have the same structure) and waits for them all. Here:

1. the parameters, a dict of two HBM refs, are copied whole into a dict of
   VMEM refs by one `sync_copy` (two DMAs in flight together);
2. a `fori_loop` then brings each (8, 128) block of x into VMEM, computes
   `x * scale + shift` there and copies the block out: two `sync_copy`s
   per step, each on a semaphore of its own.

copyir imports each `sync_copy` as a `copy.scope` holding its semaphore,
the starts and the waits, and checks them like any other DMAs.

    copyir check examples/pallas/sync_copy_tree.py --call main
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

STEPS = 4
BLOCK = (8, 128)


def affine_kernel(x_hbm, params_hbm, y_hbm, scale, shift, buf):
    # 1. A pytree of refs in one copy: {"scale", "shift"} HBM -> VMEM.
    pltpu.sync_copy(params_hbm, {"scale": scale, "shift": shift})

    # 2. One block per step, in and out.
    def step(i, carry):
        rows = pl.ds(i * BLOCK[0], BLOCK[0])
        pltpu.sync_copy(x_hbm.at[rows], buf)
        buf[...] = buf[...] * scale[...] + shift[...]
        pltpu.sync_copy(buf, y_hbm.at[rows])
        return carry

    jax.lax.fori_loop(0, STEPS, step, 0)


def affine(x, params, interpret=False):
    """x * scale + shift, block by block, for params {"scale", "shift"}
    of one block's shape each."""
    hbm = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(
        affine_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[hbm, {"scale": hbm, "shift": hbm}],
        out_specs=hbm,
        scratch_shapes=[pltpu.VMEM(BLOCK, jnp.float32)] * 3,
        interpret=interpret,
    )(x, params)


def main():
    x = jnp.arange(STEPS * BLOCK[0] * BLOCK[1], dtype=jnp.float32).reshape(-1, 128)
    params = {
        "scale": jnp.full(BLOCK, 3.0, jnp.float32),
        "shift": jnp.full(BLOCK, -1.0, jnp.float32),
    }
    return affine(x, params)
