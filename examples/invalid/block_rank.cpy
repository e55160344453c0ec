# A block shape has one entry per dimension of the array.

kernel block_rank(x: f32[64, 128] @hbm) {
  # expected-error@+1 {{Block shape (64,) has rank 1 but the array has rank 2}}
  bx = buffered_ref x, block=(64,), buffers=2
}
