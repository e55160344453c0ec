# A prefetch past the end: `when i + 1 <= 8` lets the last iteration fetch
# a ninth block of an array that has eight.

kernel prefetch_past_end(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[2, 8, 128] @vmem
  sems = semaphore[2]
  copy_start x[ds(0, 8)] -> buf[0], sems[0]
  for i in range(8) {
    slot = i % 2
    when i + 1 <= 8 {
      # expected-error@+1 {{Slice 64:72 is out of bounds for dimension 0 of x (size 64), at i = 7}}
      copy_start x[ds(8 * (i + 1), 8)] -> buf[(i + 1) % 2], sems[(i + 1) % 2]
    }
    copy_wait x[ds(8 * i, 8)] -> buf[slot], sems[slot]
    sync_copy buf[slot] -> y[ds(8 * i, 8)]
  }
}
