# A wait skipped by a `when`: the condition meant for the prefetch also
# guards the wait, so at the last iteration the block is copied out while
# its DMA is still in flight.

kernel wait_skipped(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  sems = semaphore[2]
  copy_start x[ds(0, 8)] -> buf[0], sems[0]
  for i in range(8) {
    slot = i % 2
    when i + 1 < 8 {
      copy_start x[ds(8 * (i + 1), 8)] -> buf[(i + 1) % 2], sems[(i + 1) % 2]
      copy_wait x[ds(8 * i, 8)] -> buf[slot], sems[slot]
    }
    # expected-error@+1 {{Race: this DMA reads buf[1:2, 0:8, 0:128] while the DMA started at examples/invalid/run/loop_wait_skipped.cpy:12:7 at i = 6 is in flight and writes it, at i = 7}}
    sync_copy buf[slot] -> y[ds(8 * i, 8)]
  }
}
