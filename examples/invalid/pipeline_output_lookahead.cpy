# Lookahead is an input's (Pallas' message, verbatim, from
# `_make_pipeline_allocations`): an output writes back the block it has.

kernel pipeline_output_lookahead(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  pipeline grid=(8,)
      in  x block=(8, 128) index=(i) -> (i, 0) buffers=3 lookahead
      # expected-error@+1 {{Output buffering does not support lookahead.}}
      out y block=(8, 128) index=(i) -> (i, 0) lookahead
      (xw, yw) {
    yw[...] = xw
  }
}
