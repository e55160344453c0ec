# A loop index exists inside its loop only (a note says which loop).

kernel loop_index_out_of_scope(x: f32[64, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  for i in range(8) {
    copy_start x[ds(8 * i, 8)] -> buf, s
    copy_wait x[ds(8 * i, 8)] -> buf, s
  }
  # expected-error@+1 {{i is not defined}}
  copy_start x[ds(8 * i, 8)] -> buf, s
}
