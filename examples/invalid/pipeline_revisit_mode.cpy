# JAX 0.12's emit_pipeline refuses an output's `revisit=` (Pallas'
# message, verbatim, from `_make_pipeline_allocations`); it says how far
# apart revisits must be instead.

kernel pipeline_revisit_mode(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  pipeline grid=(8,)
      in  x block=(8, 128) index=(i) -> (i, 0)
      # expected-error@+1 {{emit_pipeline does not implement RevisitMode. A block may be revisited once the previous write back has landed: it is awaited out_buffer_count - 1 steps after the visit that wrote it, and an input_output block is re-fetched in_buffer_count - 1 steps before the revisit, so visits must be in_buffer_count + out_buffer_count - 1 grid steps apart.}}
      out y block=(8, 128) index=(i) -> (i, 0) revisit=(any)
      (xw, yw) {
    yw[...] = xw
  }
}
