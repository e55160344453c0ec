# A computation in the loop body: y = 2 * x + 1, streamed through VMEM in
# 8 blocks of (16, 128) f32. Each block is fetched into its slot (the next
# one is prefetched into the other), computed elementwise into yw in f32
# (`yw[...] = 2.0 * xw + 1.0`, as a Pallas kernel body writes it), and
# written back. Computations read and write VMEM like any access: yw is
# written again only after its previous write-back was waited.

kernel loop_compute(x: f32[128, 128] @hbm, y: f32[128, 128] @hbm) {
  xw = alloc f32[2, 16, 128] @vmem
  yw = alloc f32[16, 128] @vmem
  sin = semaphore[2]
  sout = semaphore
  copy_start x[0:16] -> xw[0], sin[0]
  for i in range(8) {
    slot = i % 2
    when i + 1 < 8 {
      copy_start x[ds(16 * (i + 1), 16)] -> xw[(i + 1) % 2], sin[(i + 1) % 2]
    }
    copy_wait x[ds(16 * i, 16)] -> xw[slot], sin[slot]
    yw[...] = 2.0 * xw[slot] + 1.0
    copy_start yw -> y[ds(16 * i, 16)], sout
    copy_wait yw -> y[ds(16 * i, 16)], sout
  }
}
