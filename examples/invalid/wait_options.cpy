# add and priority belong to a DMA start; a wait only names the descriptor.

kernel wait_options(x: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  copy_start x -> buf, s, add
  # expected-error@+1 {{add applies to a DMA start, not to a wait}}
  copy_wait x -> buf, s, add
}
