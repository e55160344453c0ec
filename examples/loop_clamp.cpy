# The last block clamped, as Pallas kernels write it: 1000 rows stream
# HBM -> VMEM -> HBM in 8 blocks of 128 through two slots, but 128 does not
# divide 1000, so block i starts at min(128 * i, 872) (Pallas'
# `pl.ds(jnp.minimum(i * 128, n - 128), 128)`): the last block is rows
# 872:1000, overlapping block 6, every block full. `min` is not affine;
# expand-min-max splits each copy that reads it into its two affine pieces,
# `128 * i` where 128 * i <= 872 and 872 elsewhere, each under a `when`.

kernel loop_clamp(x: f32[1000, 128] @hbm, y: f32[1000, 128] @hbm) {
  buf = alloc f32[2, 128, 128] @vmem
  sems = semaphore[2]
  out = semaphore[2]
  copy_start x[ds(0, 128)] -> buf[0], sems[0]         # prefetch block 0
  for i in range(8) {
    slot = i % 2
    start = min(128 * i, 872)
    next = min(128 * i + 128, 872)
    when i + 1 < 8 {                                   # prefetch block i + 1
      copy_start x[ds(next, 128)] -> buf[(i + 1) % 2], sems[(i + 1) % 2]
    }
    copy_wait x[ds(start, 128)] -> buf[slot], sems[slot]
    copy_start buf[slot] -> y[ds(start, 128)], out[slot]
    copy_wait buf[slot] -> y[ds(start, 128)], out[slot]
  }
}
