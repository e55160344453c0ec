# A pipeline split over cores: y's block i is the running maximum over j
# of x's (64, 128) blocks (i, j), for a (256, 384) f32 x walked as grid
# (4, 3) with dimension_semantics=(parallel, arbitrary), as emit_pipeline
# over 2 cores (`core_axis_name`). Pallas' `_partition_grid` gives each
# core a contiguous share of the parallel dimension, rows 0-1 and 2-3, and
# each core pipelines over its share alone (its prologue, its prefetches,
# its epilogue). Without `cores=` emit_pipeline ignores the semantics and
# prefetches across rows. copyir holds the cores to their independence: a
# body that carried state across them would be reported in every mode,
# naming both cores (and random mode runs them in a seeded permuted order).

kernel pipeline_parallel(x: f32[256, 384] @hbm, y: f32[256, 128] @hbm) {
  pipeline grid=(4, 3) dimension_semantics=(parallel, arbitrary) cores=2
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
