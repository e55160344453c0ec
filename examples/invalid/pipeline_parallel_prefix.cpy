# A kernel grid's parallel dimensions come first (Pallas' message,
# verbatim): here the parallel one is the inner dimension. emit_pipeline
# (`pipeline` without `kernel_grid`) takes them anywhere.

kernel pipeline_parallel_prefix(x: f32[64, 256] @hbm, y: f32[64, 256] @hbm) {
  # expected-error@+1 {{Dimensions with parallel semantics must form a prefix of the grid.}}
  pipeline kernel_grid grid=(8, 2) dimension_semantics=(arbitrary, parallel)
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = xw
  }
}
