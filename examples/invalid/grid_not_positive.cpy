# Every dimension of a grid has at least one step (Pallas' message, verbatim).

kernel grid_not_positive(x: f32[64, 128] @hbm) {
  buf = alloc f32[8, 64] @vmem
  s = semaphore
  # expected-error@+1 {{All elements in the grid must be strictly positive, but got grid=(0, 3)}}
  for i, j in grid(0, 3) {
    copy_start x[ds(8 * i, 8), ds(64 * j, 64)] -> buf, s
    copy_wait x[ds(8 * i, 8), ds(64 * j, 64)] -> buf, s
  }
}
