# A pipeline body that writes only the first half of its output window's
# rows. Pallas writes the whole window back, so y's other rows receive what
# the window's slot held: interpret mode's uninitialized value (NaN) at the
# slot's first use, the rows of an earlier block after that (here they are
# never written, so they stay NaN). copyir does the same and warns once, at
# the first such write-back, naming the region and its first unwritten
# element. A body that reads its output window before writing it is still
# an error.

kernel pipeline_half(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  pipeline grid=(4,)
      in  x block=(8, 128) index=(i) -> (i, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[0:4, :] = xw[0:4, :] * 2.0
  }
}
