# An empty action string is not an action either.

kernel unknown_action_empty(x: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{Unknown action: }}
  dma "" x -> buf, s
}
