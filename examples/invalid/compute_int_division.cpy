# `/` divides floats; integers have no division in a computation.

kernel compute_int_division(x: i32[8, 128] @hbm) {
  a = alloc i32[8, 128] @vmem
  b = alloc i32[8, 128] @vmem
  sync_copy x -> a
  # expected-error@+1 {{/ is for floats; the destination is i32}}
  b[...] = a / 2
}
