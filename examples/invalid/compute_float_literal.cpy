# A literal takes the destination's dtype: 0.5 is no i32.

kernel compute_float_literal(x: i32[8, 128] @hbm) {
  acc = alloc i32[8, 128] @vmem
  # expected-error@+1 {{Float literal 0.5 for an integer destination of i32}}
  acc[...] = 0.5
}
