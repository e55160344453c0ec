# An integer index must lie inside its dimension.

kernel index_out_of_bounds(x: f32[4, 128] @hbm) {
  buf = alloc f32[128] @vmem
  s = semaphore
  # expected-error@+1 {{Index 4 is out of bounds for dimension 0 of x (size 4)}}
  copy_start x[4] -> buf, s
}
