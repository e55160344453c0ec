# Every dimension of a ref is at least 1.

kernel bad_dimension(x: f32[8, 128] @hbm) {
  # expected-error@+1 {{Every dimension of a ref must be >= 1, got f32[8, 0] @vmem}}
  buf = alloc f32[8, 0] @vmem
}
