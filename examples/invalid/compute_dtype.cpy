# Every input of a computation has the destination's dtype, as in Pallas:
# there is no implicit conversion.

kernel compute_dtype(x: f32[8, 128] @hbm) {
  xw = alloc f32[8, 128] @vmem
  acc = alloc i32[8, 128] @vmem
  sync_copy x -> xw
  acc[...] = 0
  # expected-error@+1 {{Computation input xw is f32[8, 128] @vmem, but its destination is i32[8, 128] @vmem}}
  acc += xw
}
