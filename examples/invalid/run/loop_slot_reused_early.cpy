# A double buffer whose prefetch goes to the wrong slot: `buf[i % 2]`
# instead of `buf[(i + 1) % 2]`, so the next block is fetched into the slot
# the current block is still arriving in.

kernel slot_reused_early(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  sems = semaphore[2]
  copy_start x[ds(0, 8)] -> buf[0], sems[0]
  for i in range(8) {
    slot = i % 2
    when i + 1 < 8 {
      # expected-error@+1 {{Race: this DMA writes buf[0:1, 0:8, 0:128] while the DMA started at examples/invalid/run/loop_slot_reused_early.cpy:8:3 is in flight and writes it, at i = 0}}
      copy_start x[ds(8 * (i + 1), 8)] -> buf[slot], sems[(i + 1) % 2]
    }
    copy_wait x[ds(8 * i, 8)] -> buf[slot], sems[slot]
    sync_copy buf[slot] -> y[ds(8 * i, 8)]
  }
}
