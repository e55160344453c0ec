# A prefetching double buffer written as a loop: 16 blocks of (8, 128) f32
# stream HBM -> VMEM -> HBM through two slots. While block i is waited and
# written back from slot i % 2, block i + 1 is already on its way into the
# other slot; `when` leaves the prefetch out of the last iteration. One
# semaphore per slot means each wait finishes exactly its own DMA. The wait
# goes through a descriptor (`async_copy`, Pallas' make_async_copy), which
# names the block and slot of its own iteration.

kernel loop_double_buffer(x: f32[128, 128] @hbm, y: f32[128, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  sems = semaphore[2]
  out = semaphore[2]
  copy_start x[ds(0, 8)] -> buf[0], sems[0]          # prefetch block 0
  for i in range(16) {
    slot = i % 2
    when i + 1 < 16 {                                # prefetch block i + 1
      copy_start x[ds(8 * (i + 1), 8)] -> buf[(i + 1) % 2], sems[(i + 1) % 2]
    }
    c = async_copy x[ds(8 * i, 8)] -> buf[slot], sems[slot]
    c.wait()                                         # block i is in its slot
    copy_start buf[slot] -> y[8 * i : 8 * i + 8], out[slot]
    copy_wait buf[slot] -> y[8 * i : 8 * i + 8], out[slot]
  }
}
