# Block indices are checked against the grid: 1000 rows in blocks of 128
# make 8 blocks (0 to 7), the last one ragged.

kernel block_index_out_of_bounds(x: f32[1000, 384] @hbm) {
  bx = buffered_ref x, block=(128, 128), buffers=2
  # expected-error@+1 {{Block index 8 is out of bounds in dimension 0: the grid of bx has 8 blocks there}}
  buffered_copy x -> bx[8, 0], slot=0
}
