# Negative indices (numpy's count-from-the-end) are not supported.

kernel negative_index(x: f32[4, 128] @hbm) {
  buf = alloc f32[128] @vmem
  s = semaphore
  # expected-error@+1 {{Negative index -1 in x[-1] is not supported}}
  copy_start x[-1] -> buf, s
}
