# A DMA moves equal shapes: Mosaic's message, verbatim.

kernel shape_mismatch(x: f32[16, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{DMA source and target shape mismatch.}}
  copy_start x -> buf, s
  copy_wait x -> buf, s
}
