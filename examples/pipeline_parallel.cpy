# A pipeline with a parallel dimension: y's block i is the running maximum
# over j of x's (64, 128) blocks (i, j), for a (256, 384) f32 x walked as
# grid (4, 3) with dimension_semantics=(parallel, arbitrary). On hardware
# the parallel rows run on different cores, each with its own schedule;
# the arbitrary axis j carries the maximum in y's window, which stays put
# over j. copyir holds the rows to their claim of independence: a body
# that carried state across rows would be reported in every mode, naming
# both rows (and random mode runs them in a seeded permuted order).

kernel pipeline_parallel(x: f32[256, 384] @hbm, y: f32[256, 128] @hbm) {
  pipeline grid=(4, 3) dimension_semantics=(parallel, arbitrary)
      in  x block=(64, 128) index=(i, j) -> (i, j)
      out y block=(64, 128) index=(i, j) -> (i, 0)
      (xw, yw, i, j) {
    when j == 0 {
      yw[...] = xw
    }
    when j >= 1 {
      yw[...] = max(yw, xw)
    }
  }
}
