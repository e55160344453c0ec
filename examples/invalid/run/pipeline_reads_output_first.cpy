# A body that reads its output window before writing it at a block's first
# visit: the sum forgets to start from zero (`when j == 0 { yw[...] = 0 }`),
# so its first `+=` reads a window nobody wrote. The pipeline marks an
# output window unwritten whenever its block changes, and the run reports
# the read at the step where it happens.

kernel pipeline_reads_output_first(x: f32[16, 512] @hbm, y: f32[16, 128] @hbm) {
  pipeline grid=(2, 4)
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (i, 0)
      (xw, yw) {
    # expected-error@+1 {{Computation reads y_window[0:1, 0:8, 0:128], which nobody wrote (first unwritten: y_window[0, 0, 0]), at i = 0, j = 0}}
    yw += xw
  }
}
