# Static views are checked against the ref's shape; copyir never clips a
# slice the way numpy does.

kernel slice_out_of_bounds(x: f32[64, 128] @hbm) {
  buf = alloc f32[32, 128] @vmem
  s = semaphore
  # expected-error@+1 {{Slice 48:80 is out of bounds for dimension 0 of x (size 64)}}
  copy_start x[48:80, :] -> buf, s
}
