# A sum over one grid axis into an output block that stays in VMEM:
# y's block i = the sum over j of x's (128, 128) block (i, j), for a
# (256, 512) f32 x walked as grid (2, 4). y's index map ignores j, so its
# block stays the same over j: the pipeline neither fetches nor writes it
# back until it changes (after j == 3), and the body accumulates into the
# window, initialising it at the first visit (`when j == 0`), as Pallas'
# docs say. The body names the grid indices after the windows to use j.

kernel pipeline_sum(x: f32[256, 512] @hbm, y: f32[256, 128] @hbm) {
  pipeline grid=(2, 4)
      in  x block=(128, 128) index=(i, j) -> (i, j)
      out y block=(128, 128) index=(i, j) -> (i, 0)
      (xw, yw, i, j) {
    when j == 0 {
      yw[...] = 0
    }
    yw += xw
  }
}
