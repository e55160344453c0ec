# On a kernel grid, an output block that comes back after another one lost
# data: the pipeline wrote the block back when it changed, and the second
# visit starts from a fresh window. copyir reports it statically, in the
# form of Pallas' interpret-mode check for grids. y's index map follows j
# only, so over grid (2, 2) its blocks go (0, 0), (1, 0), then (0, 0)
# again. emit_pipeline checks no revisits: the run reports the race one
# makes (examples/invalid/run/pipeline_revisit_race.cpy).

kernel pipeline_revisit(x: f32[16, 256] @hbm, y: f32[16, 128] @hbm) {
  # expected-error@+1 {{Revisited block (0, 0) of output 0 in iteration (1, 0). The block was previously visited in iterations (0, 0) through (0, 0) .}}
  pipeline kernel_grid grid=(2, 2)
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (j, 0)
      (xw, yw) {
    yw[...] = xw
  }
}
