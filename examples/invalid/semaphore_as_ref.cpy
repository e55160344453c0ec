# A semaphore is not a ref: it cannot be the source of a DMA.

kernel semaphore_as_ref(x: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  # expected-error@+1 {{copy_start expects a ref as src, but s is a semaphore}}
  copy_start s -> buf, s
}
