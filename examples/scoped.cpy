# Scoped allocation, Pallas' `pl.run_scoped`: the allocs and semaphores
# directly in a `scope { ... }` are made afresh on every entry (a buffer
# unwritten, a semaphore at zero) and exist only inside it. Each step of
# the loop takes a fresh DMA semaphore for an HBM-to-HBM copy (as jax's
# test_hbm_hbm_grid_dma does per grid step), and, in a nested scope, a
# fresh VMEM buffer that it fills, scales and writes back. Leaving a scope
# while a DMA on its buffers or semaphores is in flight is an error.

kernel scoped(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm, z: f32[64, 128] @hbm) {
  for i in range(8) {
    scope {
      sem = semaphore
      copy_start x[ds(8 * i, 8)] -> z[ds(8 * i, 8)], sem
      copy_wait x[ds(8 * i, 8)] -> z[ds(8 * i, 8)], sem
      scope {
        buf = alloc f32[8, 128] @vmem
        copy_start x[ds(8 * i, 8)] -> buf, sem
        copy_wait x[ds(8 * i, 8)] -> buf, sem
        buf[...] = buf * 2.0 + 1.0
        copy_start buf -> y[ds(8 * i, 8)], sem
        copy_wait buf -> y[ds(8 * i, 8)], sem
      }
    }
  }
}
