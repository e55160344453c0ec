# emit_pipeline over cores splits a parallel dimension among them (Pallas'
# `_partition_grid`); with none, Pallas' message, verbatim (it assumes
# `arbitrary` everywhere when no semantics are given).

kernel pipeline_cores_no_parallel(x: f32[64, 256] @hbm, y: f32[64, 256] @hbm) {
  # expected-error@+1 {{Cannot partition over cores without parallel grid dimensions: dimension_semantics=(<GridDimensionSemantics.ARBITRARY: 'arbitrary'>, <GridDimensionSemantics.ARBITRARY: 'arbitrary'>)}}
  pipeline grid=(8, 2) cores=2
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = xw
  }
}
