# An input with lookahead (`pl.Buffered(3, use_lookahead=True)`): x's row
# block stays put over j, so a plain 3-buffer input would fetch only one
# block ahead (2 steps); with lookahead, Pallas' `fetch_with_lookahead`
# walks the grid and fetches the next 2 blocks that differ, 4 steps ahead,
# as soon as a slot is free. y = 2 x, column block by column block.

kernel pipeline_lookahead(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm) {
  pipeline grid=(4, 2)
      in  x block=(8, 256) index=(i, j) -> (i, 0) buffers=3 lookahead
      out y block=(8, 128) index=(i, j) -> (i, j)
      (xw, yw, i, j) {
    when j == 0 {
      yw[...] = xw[:, 0:128] * 2.0
    }
    when j == 1 {
      yw[...] = xw[:, 128:256] * 2.0
    }
  }
}
