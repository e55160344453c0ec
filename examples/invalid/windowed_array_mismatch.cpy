# A BufferedRef windows arrays of one shape and dtype.

kernel windowed_array_mismatch(x: f32[64, 128] @hbm, y: f32[32, 128] @hbm) {
  bx = buffered_ref x, block=(32, 128), buffers=2
  # expected-error@+1 {{buffered_copy: y is f32[32, 128] @hbm, but bx windows f32[64, 128]}}
  buffered_copy y -> bx[0, 0], slot=0
}
