# A loop runs at least once: range(0) has no iteration.

kernel empty_loop(x: f32[64, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{Loop i over range(0, 0) runs 0 times: a loop runs at least once}}
  for i in range(0) {
    copy_start x[ds(8 * i, 8)] -> buf, s
    copy_wait x[ds(8 * i, 8)] -> buf, s
  }
}
