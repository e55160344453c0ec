# A loop index names each iteration's index: it cannot be rebound in the
# loop's body (nor reused by a nested loop).

kernel loop_index_rebound(x: f32[64, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  for i in range(8) {
    # expected-error@+1 {{i is the index of the loop at line 7 and cannot be rebound}}
    i = i + 1
    copy_start x[ds(8 * i, 8)] -> buf, s
    copy_wait x[ds(8 * i, 8)] -> buf, s
  }
}
