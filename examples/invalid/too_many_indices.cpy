# A view takes at most one index per dimension.

kernel too_many_indices(x: f32[8, 128] @hbm) {
  buf = alloc f32[128] @vmem
  s = semaphore
  # expected-error@+1 {{x has rank 2 but is indexed with 3 indices}}
  copy_start x[0, 1, 2] -> buf, s
}
