# Index expressions are affine: loop indices, integers, + and -, and * // %
# by a constant. A product of two loop indices is not affine.

kernel non_affine_index(x: f32[64, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  for i, j in grid(4, 2) {
    # expected-error@+1 {{Index expression i * j is not affine: it multiplies two index values}}
    copy_start x[ds(8 * i + i * j, 8)] -> buf, s
    copy_wait x[0:8] -> buf, s
  }
}
