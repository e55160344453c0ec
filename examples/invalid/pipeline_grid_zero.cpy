# Every dimension of a pipeline's grid has at least one step (Pallas'
# message, verbatim), reported at the pipeline.

kernel pipeline_grid_zero(x: f32[64, 384] @hbm, y: f32[64, 384] @hbm) {
  # expected-error@+1 {{All elements in the grid must be strictly positive, but got grid=(0, 3)}}
  pipeline grid=(0, 3)
      in  x block=(64, 128) index=(i, j) -> (i, j)
      out y block=(64, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = xw
  }
}
