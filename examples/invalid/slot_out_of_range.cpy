# A window has `buffers` slots, numbered from 0.

kernel slot_out_of_range(x: f32[64, 128] @hbm) {
  bx = buffered_ref x, block=(32, 128), buffers=2
  # expected-error@+1 {{Slot 2 is out of range for bx with 2 buffers}}
  buffered_copy x -> bx[1, 0], slot=2
}
