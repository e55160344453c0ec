# Small tables in SMEM, a priority-1 DMA, and bfloat16 data.
#
# Priority (0 or 1) picks the DMA queue on the TPU; it does not change
# the result.

kernel scalars(table: i32[16] @hbm, weights: bf16[4, 128] @hbm,
               table_out: i32[16] @hbm, weights_out: bf16[4, 128] @hbm) {
  t = alloc i32[16] @smem
  w = alloc bf16[4, 128] @vmem
  s = semaphore
  copy_start table -> t, s, priority=1
  copy_start weights -> w, s
  copy_wait table -> t, s
  copy_wait weights -> w, s
  sync_copy (t, w) -> (table_out, weights_out)
}
