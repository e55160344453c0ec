# Views are unit-step slices: steps are not supported.

kernel slice_step(x: f32[64] @hbm) {
  buf = alloc f32[32] @vmem
  s = semaphore
  # expected-error@+1 {{Slice steps are not supported: x[0:64:2]}}
  copy_start x[0:64:2] -> buf, s
}
