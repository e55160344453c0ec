# A block dimension must lie between 1 and the array's dimension.

kernel block_size(x: f32[64, 128] @hbm) {
  # expected-error@+1 {{Block size 256 in dimension 1 must be between 1 and the array's extent 128}}
  bx = buffered_ref x, block=(64, 256), buffers=2
}
