# An input-output operand (JAX 0.12's `BufferedRef.input_output`): y += x
# block by block, y fetched, added to and written back by one pipeline.
# With buffers=(2, 2) y is fetched a step ahead like a 2-buffer input and
# each write-back is awaited a step later like a 2-buffer output; its
# window has 2 + 2 - 1 = 3 slots (`_total_buffer_count`), and its fetches
# and write-backs have semaphores of their own (y_in_sems, y_out_sems).
# emit_pipeline takes one only through `allocations`, which copyir's
# Pallas frontend does not import yet.

kernel pipeline_inout(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  pipeline grid=(4,)
      in    x block=(8, 128) index=(i) -> (i, 0)
      inout y block=(8, 128) index=(i) -> (i, 0) buffers=(2, 2)
      (xw, yw) {
    yw += xw
  }
}
