# y = 2 * x + 1 streamed through VMEM by a pipeline, Pallas' emit_pipeline:
# a (1000, 384) f32 array in (128, 128) blocks over grid (8, 3), row-major
# (the last index fastest). x has 3 buffers, so the pipeline fetches two
# steps ahead; y has the default 2, each write-back waited one step later.
# The last row of blocks is ragged (104 rows): its copies move only the
# rows that exist. `copyir opt -p expand-pipelines` shows the schedule as
# loops of asynchronous window copies.

kernel pipeline_scale(x: f32[1000, 384] @hbm, y: f32[1000, 384] @hbm) {
  pipeline grid=(8, 3)
      in  x block=(128, 128) index=(i, j) -> (i, j) buffers=3
      out y block=(128, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = 2.0 * xw + 1.0
  }
}
