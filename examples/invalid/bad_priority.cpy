# DMA priority is 0 or 1.

kernel bad_priority(x: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{DMA priority must be 0 or 1, got 2}}
  copy_start x -> buf, s, priority=2
}
