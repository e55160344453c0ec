# A non-trivial window needs block indices.

kernel missing_block_indices(x: f32[64, 128] @hbm) {
  bx = buffered_ref x, block=(32, 128), buffers=2
  # expected-error@+1 {{buffered_copy needs block indices on bx}}
  buffered_copy x -> bx, slot=0
}
