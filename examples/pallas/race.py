"""A deliberate race: the kernel writes a VMEM buffer while the DMA into it
is still in flight.

The DMA from x fills `buf` at some moment between its start and its wait;
the store between them writes `buf` too, so what `buf` holds after the
wait depends on which came first: x (ones) or the stored zeros. On a TPU
that is a wrong answer some of the time. copyir reports it at the store,
in every completion mode, and gives no result:

    $ copyir check examples/pallas/race.py --call main
    examples/pallas/race.py:29:5: error: Race: this computation writes
    buf[0:8, 0:128] while the DMA started at examples/pallas/race.py:28:5
    is in flight and writes it

(one line on the terminal, with the source line and a note at the start).
Pallas' interpret mode with `detect_races=True` prints `RACE DETECTED`
and returns an answer all the same.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def racy_kernel(x_hbm, y_hbm, buf, sem):
    fill = pltpu.make_async_copy(x_hbm, buf, sem)
    fill.start()
    buf[...] = jnp.zeros_like(buf)  # the race: the DMA may still be writing buf
    fill.wait()
    back = pltpu.make_async_copy(buf, y_hbm, sem)
    back.start()
    back.wait()


def racy_copy(x, interpret=False):
    """x, or zeros, or a mix (`interpret` as for pallas_call)."""
    return pl.pallas_call(
        racy_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA(())],
        interpret=interpret,
    )(x)


def main():
    return racy_copy(jnp.ones((8, 128), jnp.float32))
