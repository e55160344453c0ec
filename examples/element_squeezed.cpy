# BufferedRef windows with Element and squeezed (None) block dimensions.
#
# `rows` windows one row of x (the first dimension is squeezed, so the
# window holds f32[64] per slot) - like a Pallas BlockSpec with block shape
# (None, 64). `cols` windows 256 elements starting at an element offset:
# Element(256) takes the offset itself as its index and copies
# min(256, 640 - offset) elements, so offset 512 copies a ragged 128. As
# Pallas' BufferedRef does, the copy is rounded up to the TPU tiling (128
# 32-bit elements for a 1-D array), so a ragged part must be whole tiles
# and Element's size a multiple of 128; the rest of the slot keeps what it
# held.

kernel element_squeezed(x: f32[8, 64] @hbm, y: f32[8, 64] @hbm,
                        v: i32[640] @hbm, w: i32[640] @hbm) {
  rows = buffered_ref x, block=(None, 64), buffers=2
  buffered_copy x -> rows[3, 0], slot=0
  buffered_copy x -> rows[5, 0], slot=1
  buffered_copy rows[3, 0] -> y, slot=0
  buffered_copy rows[5, 0] -> y, slot=1

  cols = buffered_ref v, block=(Element(256),), buffers=1
  buffered_copy v -> cols[0]
  buffered_copy cols[0] -> w
  buffered_copy v -> cols[256]
  buffered_copy cols[256] -> w
  buffered_copy v -> cols[512]       # the ragged edge: 128 elements
  buffered_copy cols[512] -> w
}
