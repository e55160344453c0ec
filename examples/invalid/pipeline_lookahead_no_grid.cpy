# Lookahead walks the grid (Pallas' message, verbatim, from
# `_make_pipeline_allocations`): a pipeline that uses it needs one.

kernel pipeline_lookahead_no_grid(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # expected-error@+1 {{Grid must be specified when using lookahead.}}
  pipeline
      in  x block=(8, 128) index=(i) -> (i, 0) buffers=3 lookahead
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}
