# Block indices: one per dimension of the windowed array.

kernel block_index_count(x: f32[64, 128] @hbm) {
  bx = buffered_ref x, block=(32, 128), buffers=2
  # expected-error@+1 {{bx takes 2 block indices, got 1}}
  buffered_copy x -> bx[1], slot=0
}
