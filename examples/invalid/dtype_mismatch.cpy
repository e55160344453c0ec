# A DMA moves equal element types: Mosaic's message, verbatim (no full stop).

kernel dtype_mismatch(x: f32[8, 128] @hbm) {
  buf = alloc i32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{DMA source and target element type mismatch}}
  copy_start x -> buf, s
  copy_wait x -> buf, s
}
