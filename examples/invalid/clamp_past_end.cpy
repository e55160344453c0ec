# A clamp that does not clamp enough: min(128 * i, 880) keeps the last
# block of 128 rows from starting past row 880, but 880 + 128 is past the
# end of 1000 rows. The check is exact at every iteration, on each piece of
# the min, and names the first that fails.

kernel clamp_past_end(x: f32[1000, 128] @hbm, y: f32[1000, 128] @hbm) {
  buf = alloc f32[128, 128] @vmem
  s = semaphore
  for i in range(8) {
    # expected-error@+1 {{Slice 880:1008 is out of bounds for dimension 0 of x (size 1000), at i = 7}}
    copy_start x[ds(min(128 * i, 880), 128)] -> buf, s
    copy_wait x[ds(min(128 * i, 880), 128)] -> buf, s
    sync_copy buf -> y[ds(min(128 * i, 880), 128)]
  }
}
