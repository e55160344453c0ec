# Block indices go on the BufferedRef's side of a buffered_copy.

kernel indices_on_plain_ref(x: f32[64, 128] @hbm) {
  bx = buffered_ref x, block=(32, 128), buffers=2
  # expected-error@+1 {{Block indices belong on the BufferedRef bx, not on x}}
  buffered_copy x[1, 0] -> bx, slot=0
}
