# A min of one expression is no clamp: min and max take two or more.

kernel min_one_argument(x: f32[64, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  for i in range(8) {
    # expected-error@+1 {{Index expression min(8 * i) has 1 argument(s): min takes two or more}}
    start = min(8 * i)
    copy_start x[ds(start, 8)] -> buf, s
    copy_wait x[ds(start, 8)] -> buf, s
  }
}
