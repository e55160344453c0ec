# A slice must cover at least one element.

kernel empty_slice(x: f32[64] @hbm) {
  buf = alloc f32[32] @vmem
  s = semaphore
  # expected-error@+1 {{Empty slice 8:8 in dimension 0 of x[8:8]}}
  copy_start x[8:8] -> buf[0:0], s
}
