# A sum over one grid axis into an accumulator that stays in VMEM:
# y[i-th 128 rows] = the sum over j of x's (128, 128) block (i, j), for a
# (256, 512) f32 x walked as grid(2, 4). acc is initialised at the first
# visit of each output block (`when j == 0`), accumulates one block per
# step (`acc += xw`, an f32 add per step, in walk order), and is written
# back once, at the last step of the reduction axis (`when j == 3`), as a
# Pallas kernel with an "arbitrary" reduction axis keeps its output block
# resident.

kernel loop_sum(x: f32[256, 512] @hbm, y: f32[256, 128] @hbm) {
  xw = alloc f32[128, 128] @vmem
  acc = alloc f32[128, 128] @vmem
  s = semaphore
  for i, j in grid(2, 4) {
    when j == 0 {
      acc[...] = 0
    }
    copy_start x[ds(128 * i, 128), ds(128 * j, 128)] -> xw, s
    copy_wait x[ds(128 * i, 128), ds(128 * j, 128)] -> xw, s
    acc += xw
    when j == 3 {
      sync_copy acc -> y[ds(128 * i, 128)]
    }
  }
}
