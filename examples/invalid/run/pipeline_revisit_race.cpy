# emit_pipeline checks no revisits (JAX 0.12's `_make_pipeline_allocations`
# says visits must be far enough apart for the previous write-back to
# land). With 3 output buffers a write-back is awaited 2 steps after it
# starts, and step 2 starts the next copy of y's block 0, revisited, before
# waiting the copy step 0 started: two DMAs write y[0:8] at once.

kernel pipeline_revisit_race(x: f32[16, 256] @hbm, y: f32[16, 128] @hbm) {
  # expected-error@+1 {{Race: this DMA writes y[0:8, 0:128] while the DMA started at examples/invalid/run/pipeline_revisit_race.cpy:9:3 block (j, 0) slot (j + 2 * i) % 3 at i = 0, j = 0 is in flight and writes it, at block (j, 0) slot (j + 2 * i) % 3, at i = 1, j = 0}}
  pipeline grid=(2, 2)
      in  x block=(8, 128) index=(i, j) -> (i, j)
      out y block=(8, 128) index=(i, j) -> (j, 0) buffers=3
      (xw, yw) {
    yw[...] = xw
  }
}
