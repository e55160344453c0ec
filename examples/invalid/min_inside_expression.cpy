# min and max take a whole index (a `copy.index min`, as MLIR's affine.min
# takes a whole map): to compute with one, name it first,
# `c = min(i, 6)`, then `x[ds(8 * c + 1, 8)]`.

kernel min_inside_expression(x: f32[64, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  for i in range(8) {
    # expected-error@+1 {{Index expression min(i, 6) is inside another: min(...) takes a whole index; name it first, as in c = min(...), and compute with c}}
    copy_start x[ds(8 * min(i, 6) + 1, 8)] -> buf, s
    copy_wait x[0:8] -> buf, s
  }
}
