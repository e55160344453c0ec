"""The `pallas_call` the Pallas tests share: a kernel on one (16, 128) f32
array in HBM (`pl.ANY`), with a VMEM buffer of its size and a DMA
semaphore as scratch. Imported after the tests' `importorskip("jax")`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ANY = pl.BlockSpec(memory_space=pl.ANY)
X = jnp.arange(16 * 128, dtype=jnp.float32).reshape(16, 128)
SCRATCH = [pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA]


def hbm_call(kernel, scratch=SCRATCH, **options):
    """`pl.pallas_call` of `kernel` from X's shape to X's shape, in HBM."""
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
        in_specs=[ANY],
        out_specs=ANY,
        scratch_shapes=scratch,
        **options,
    )
