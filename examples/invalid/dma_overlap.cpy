# A DMA whose source and destination overlap is an error.

kernel dma_overlap(x: f32[64, 128] @hbm) {
  s = semaphore
  # expected-error@+1 {{DMA source x[0:32, 0:128] and destination x[16:48, 0:128] overlap}}
  copy_start x[0:32, :] -> x[16:48, :], s
}
