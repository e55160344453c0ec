# A grid whose rows are independent, as `parallel=(0,)` claims: each of the
# 4 rows of x is scaled by its 2 column blocks through VMEM scratch that
# every row reuses (each row writes it before it reads it) and written to
# its own rows of y. copyir holds the loop to its claim in every mode: a
# row that read another row's scratch, two rows writing one element of y,
# or a DMA left in flight for another row would be an error naming both
# rows. A debug copy under a kernel-level `when` runs only where `debug` is
# 1; here it never runs, and it is not checked as if it did.

kernel parallel_grid(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm, probe: f32[8, 128] @hbm) {
  xw = alloc f32[8, 128] @vmem
  yw = alloc f32[8, 128] @vmem
  debug = 0
  for i, j in grid(4, 2), parallel=(0,) {
    sync_copy x[ds(8 * i, 8), ds(128 * j, 128)] -> xw
    yw[...] = 2.0 * xw + 1.0
    sync_copy yw -> y[ds(8 * i, 8), ds(128 * j, 128)]
  }
  when debug == 1 {
    sync_copy yw -> probe
  }
}
