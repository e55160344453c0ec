# Element and squeezed (None) block dimensions in a pipeline: a moving sum
# of pairs of 8-row bands. x's rows are read through Element(16) windows at
# element offsets 8 * i (so consecutive windows overlap by 8 rows, which is
# fine for an input); y's first dimension is squeezed (None), so its window
# is an (8, 128) f32 ref and y[i] = x[8i:8i+8] + x[8i+8:8i+16]. Consecutive
# output windows must not overlap: two write-backs in flight at once would
# race, which copyir reports (Pallas accepts it).

kernel pipeline_element(x: f32[40, 128] @hbm, y: f32[4, 8, 128] @hbm) {
  pipeline grid=(4,)
      in  x block=(Element(16), 128) index=(i) -> (8 * i, 0)
      out y block=(None, 8, 128) index=(i) -> (i, 0, 0)
      (xw, yw) {
    yw[...] = xw[0:8] + xw[8:16]
  }
}
