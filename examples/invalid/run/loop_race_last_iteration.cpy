# A race at the last iteration only: the accumulator's write-back is
# started before the last block is added, so at i = 7 the computation
# writes acc while the DMA is reading it. Every earlier iteration is fine,
# and eager mode would even give the right sum.

kernel race_last_iteration(x: f32[64, 128] @hbm, y: f32[8, 128] @hbm) {
  acc = alloc f32[8, 128] @vmem
  xb = alloc f32[8, 128] @vmem
  s = semaphore
  out = semaphore
  acc[...] = 0
  for i in range(8) {
    copy_start x[ds(8 * i, 8)] -> xb, s
    copy_wait x[ds(8 * i, 8)] -> xb, s
    when i == 7 {
      copy_start acc -> y, out
    }
    # expected-error@+1 {{Race: this computation writes acc[0:8, 0:128] while the DMA started at examples/invalid/run/loop_race_last_iteration.cpy:16:7 at i = 7 is in flight and reads it, at i = 7}}
    acc += xb
  }
  copy_wait acc -> y, out
}
