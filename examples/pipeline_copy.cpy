# A double-buffered copy by a pipeline: a (1000, 384) f32 array through
# (128, 128) blocks over grid (8, 3), 2 buffers in and out (the default).
# While the body copies block s from its input window to its output
# window, the fetch of block s + 1 and the write-back of block s - 1 are in
# flight. The last row of blocks is ragged (104 rows): its copies move only
# the rows that exist. `copyir run --trace` prints the schedule.

kernel pipeline_copy(x: f32[1000, 384] @hbm, y: f32[1000, 384] @hbm) {
  pipeline grid=(8, 3)
      in  x block=(128, 128) index=(i, j) -> (i, j)
      out y block=(128, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = xw
  }
}
