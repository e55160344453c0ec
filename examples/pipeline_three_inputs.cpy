# Three inputs with 4, 2 and 3 buffers and an output with 3, as JAX 0.12's
# emit_pipeline runs them: y = a + 2 b + c over (8, 128) blocks of
# (32, 256) f32 arrays, grid (4, 2). The prologue queues every input's
# step-0 block, then the step-1 blocks of the inputs that prefetch that far
# (a and c), then a's step-2 block (Pallas' `initialize_step`, called per
# step over all operands); each step prefetches `buffers - 1` steps ahead.
# Each write-back of y is awaited 2 steps after it starts (`buffers - 1`),
# and the epilogue waits the last two, the older first. JAX 0.10.2 refused
# an output's third buffer; copyir's `kernel_grid` still does.

kernel pipeline_three_inputs(a: f32[32, 256] @hbm, b: f32[32, 256] @hbm, c: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4, 2)
      in  a block=(8, 128) index=(i, j) -> (i, j) buffers=4
      in  b block=(8, 128) index=(i, j) -> (i, j)
      in  c block=(8, 128) index=(i, j) -> (i, j) buffers=3
      out y block=(8, 128) index=(i, j) -> (i, j) buffers=3
      (aw, bw, cw, yw) {
    yw[...] = aw + 2.0 * bw + cw
  }
}
