# Copyright 2024 The JAX Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     https://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# The code cells of docs/pallas/tpu/pipelining.md in jax at jax-v0.10.2 (990e6a0b84138346e6a38785412f36356e0e5dc3), in order,
# extracted by benchmarks/corpus/vendor.py. Each `# %%` line starts a
# cell and names its line in the page; IPython magics are commented out.
# ```python snippets, which the page does not run, are comments.

# %% docs/pallas/tpu/pipelining.md:30
#@title Imports

import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import jax.numpy as jnp
import numpy as np

# %% docs/pallas/tpu/pipelining.md:114
def hbm_vmem_kernel(x_hbm_ref, out_vmem_ref, scratch_vmem_ref):
  pltpu.sync_copy(x_hbm_ref.at[0:1], scratch_vmem_ref)
  out_vmem_ref[...] = scratch_vmem_ref[...] + 1

x = jax.random.uniform(jax.random.key(0), (8, 128), jnp.float32)
out = pl.pallas_call(hbm_vmem_kernel,
  in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
  out_shape=jax.ShapeDtypeStruct((1, 128), jnp.float32),
  scratch_shapes=(pltpu.VMEM(shape=(1, 128), dtype=jnp.float32),)
)(x)

np.testing.assert_allclose(out, x[0:1] + 1)

# %% [snippet] docs/pallas/tpu/pipelining.md:144
# pl.BlockSpec(
#   pipeline_mode=pl.Buffered(buffer_count=buffer_count)
# )

# %% [snippet] docs/pallas/tpu/pipelining.md:164
# def emit_pipeline(
#     kernel: Callable,
#     grid: tuple[int],
#     in_specs: PyTree[BlockSpec] = None,
#     out_specs: PyTree[BlockSpec] = None,
#     dimension_semantics: tuple[GridDimensionSemantics] = None,
#     core_axis: int | None = None,
# ) -> Callable:
#   ... # Returns a custom pipeline given an inner kernel and BlockSpecs.

# %% [snippet] docs/pallas/tpu/pipelining.md:187
# pl.BlockSpec(
#   pipeline_mode=pl.Buffered(buffer_count=buffer_count, use_lookahead=True)
# )

# %% [snippet] docs/pallas/tpu/pipelining.md:201
# pl.BlockSpec(
#    block_shape=(pl.BoundedSlice(32), 256),
#    index_map=lambda *grid_idxs: (pl.ds(start, end), 0),
# )

# %% docs/pallas/tpu/pipelining.md:208
# The following kernel copies `x` to the output in dynamic-sized chunks
# passed in via `slices`.

def dynamic_block_example_kernel(x_hbm, slices_hbm, o_hbm, slices_smem):
    pltpu.sync_copy(slices_hbm, slices_smem)  # Copy slices into SMEM.
    def pipeline_body(x_vmem, o_vmem):
        o_vmem[...] = x_vmem[...]
    def index_map(i):
        start = slices_smem[i, 0]
        size = slices_smem[i, 1] - slices_smem[i, 0]
        return (pl.ds(start, size), 0)
    block_spec = pl.BlockSpec(block_shape=(pl.BoundedSlice(8), 128),
                              index_map=index_map)
    pltpu.emit_pipeline(
        pipeline_body,
        grid=(slices.shape[0],),
        in_specs=[block_spec],
        out_specs=block_spec
    )(x_hbm, o_hbm)

x = jax.random.uniform(jax.random.key(0), (8, 128), jnp.float32)
slices = jnp.array([[0, 2], [2, 3], [3, 5], [5, 8]], dtype=jnp.int32)

hbm_block_spec = pl.BlockSpec(memory_space=pl.ANY)
out = pl.pallas_call(dynamic_block_example_kernel,
               in_specs=[hbm_block_spec, hbm_block_spec],
               out_specs=hbm_block_spec,
               out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               scratch_shapes=(pltpu.SMEM(slices.shape, jnp.int32),)
              )(x, slices)

np.testing.assert_allclose(x, out)

# %% docs/pallas/tpu/pipelining.md:267
def add_matrices_kernel(x_vmem_ref, y_vmem_ref, z_vmem_ref):
  # Load x and y from VMEM into VREGs
  x_vregs = x_vmem_ref[:, :]
  y_vregs = y_vmem_ref[:, :]
  # Execute a vectorized add
  z_vregs = x_vregs + y_vregs
  # Store the output values in VREGs back into VMEM
  z_vmem_ref[:, :] = z_vregs

def add_matrices_pipelined_megacore(x: jax.Array, y: jax.Array) -> jax.Array:
  block_spec = pl.BlockSpec((256, 512), lambda i: (i, 0))
  return pl.pallas_call(
      add_matrices_kernel,
      out_shape=jax.ShapeDtypeStruct.like(x),
      in_specs=[block_spec, block_spec],
      out_specs=block_spec,
      grid=(2,),
      compiler_params=pltpu.CompilerParams(
          dimension_semantics=("parallel",))
  )(x, y)

x, y = jnp.ones((512, 512)), jnp.ones((512, 512))
add_matrices_pipelined_megacore(x, y)

# %% [snippet] docs/pallas/tpu/pipelining.md:318
# def kernel_body(...):
#   def inner_pipeline_body(...):
#     ...
#   pltpu.emit_pipeline(inner_pipeline_body,
#                       grid=(4, 4),
#                       core_axis=0,
#                       dimension_semantics=("parallel", "sequential"))
#
# pl.pallas_call(
#       kernel_body,
#       grid=(num_cores,),
#       compiler_params=pltpu.CompilerParams(
#           dimension_semantics=("parallel",))
#   )
