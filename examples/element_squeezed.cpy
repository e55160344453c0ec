# BufferedRef windows with Element and squeezed (None) block dimensions.
#
# `rows` windows one row of x (the first dimension is squeezed, so the
# window holds f32[64] per slot) - like a Pallas BlockSpec with block shape
# (None, 64). `cols` windows 48 elements starting at an element offset:
# Element(48) takes the offset itself as its index and copies
# min(48, 100 - offset) elements, so offset 80 copies a ragged 20.

kernel element_squeezed(x: f32[8, 64] @hbm, y: f32[8, 64] @hbm,
                        v: i32[100] @hbm, w: i32[100] @hbm) {
  rows = buffered_ref x, block=(None, 64), buffers=2
  buffered_copy x -> rows[3, 0], slot=0
  buffered_copy x -> rows[5, 0], slot=1
  buffered_copy rows[3, 0] -> y, slot=0
  buffered_copy rows[5, 0] -> y, slot=1

  cols = buffered_ref v, block=(Element(48),), buffers=1
  buffered_copy v -> cols[0]
  buffered_copy cols[0] -> w
  buffered_copy v -> cols[48]
  buffered_copy cols[48] -> w
  buffered_copy v -> cols[80]        # the ragged edge: 20 elements
  buffered_copy cols[80] -> w
}
