# A BufferedRef needs at least one buffer.

kernel bad_buffers(x: f32[64, 128] @hbm) {
  # expected-error@+1 {{buffers must be >= 1, got 0}}
  bx = buffered_ref x, block=(32, 128), buffers=0
}
