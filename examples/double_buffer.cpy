# Double buffering with a semaphore array: while one slot's block is being
# written back, the next block is already streaming into the other slot.
# One semaphore per slot means each wait finishes exactly its own DMA.

kernel double_buffer(x: f32[4, 8, 128] @hbm, y: f32[4, 8, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  sin = semaphore[2]
  sout = semaphore[2]

  copy_start x[0] -> buf[0], sin[0]           # prefetch block 0
  copy_start x[1] -> buf[1], sin[1]           # prefetch block 1
  copy_wait x[0] -> buf[0], sin[0]
  copy_start buf[0] -> y[0], sout[0]          # write block 0 back
  copy_wait x[1] -> buf[1], sin[1]
  copy_start buf[1] -> y[1], sout[1]          # write block 1 back

  copy_wait buf[0] -> y[0], sout[0]           # slot 0 is free again
  copy_start x[2] -> buf[0], sin[0]
  copy_wait buf[1] -> y[1], sout[1]           # slot 1 is free again
  copy_start x[3] -> buf[1], sin[1]

  copy_wait x[2] -> buf[0], sin[0]
  copy_start buf[0] -> y[2], sout[0]
  copy_wait x[3] -> buf[1], sin[1]
  copy_start buf[1] -> y[3], sout[1]
  copy_wait buf[0] -> y[2], sout[0]
  copy_wait buf[1] -> y[3], sout[1]
}
