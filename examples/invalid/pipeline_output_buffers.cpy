# On a kernel grid (a pallas_call's grid and BlockSpecs) an output takes
# 1 or 2 buffers (Pallas' message, verbatim, as JAX 0.10.2's emit_pipeline
# gave it): a third would only delay a write-back that nothing waits for
# sooner. JAX 0.12's emit_pipeline takes more (copyir's `pipeline` without
# `kernel_grid`): examples/pipeline_three_inputs.cpy.

kernel pipeline_output_buffers(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{Buffer count >2 not supported for output buffered refs.}}
  pipeline kernel_grid grid=(8,)
      in  x block=(8, 128) index=(i) -> (i, 0) buffers=3
      out y block=(8, 128) index=(i) -> (i, 0) buffers=3
      (xw, yw) {
    yw[...] = xw
  }
}
