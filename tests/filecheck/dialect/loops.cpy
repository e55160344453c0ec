# RUN: copyir verify --emit cpy %s | filecheck %s
# RUN: copyir verify --emit mlir %s | copyir verify --input-format mlir --emit cpy - | filecheck %s
# RUN: copyir verify --emit cpy --debuginfo %s | copyir verify --emit cpy - | filecheck %s

# Loops, conditions, index expressions, descriptors, asynchronous window
# copies and computations print back as written, except for the spellings
# the printer normalises (shown in the comments), and survive a trip
# through the MLIR form.

# CHECK:      kernel loops(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm, w: f32[1000, 384] @hbm) {
kernel loops(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm, w: f32[1000, 384] @hbm) {
  # CHECK-NEXT:   buf = alloc f32[2, 8, 128] @vmem
  buf = alloc f32[2, 8, 128] @vmem
  # CHECK-NEXT:   acc = alloc f32[8, 128] @vmem
  acc = alloc f32[8, 128] @vmem
  # CHECK-NEXT:   sm = alloc f32[4] @smem
  sm = alloc f32[4] @smem
  # CHECK-NEXT:   sems = semaphore[2]
  sems = semaphore[2]
  # CHECK-NEXT:   out = semaphore[2]
  out = semaphore[2]
  # CHECK-NEXT:   bw = buffered_ref f32[1000, 384], block=(128, 128), buffers=2
  bw = buffered_ref w, block=(128, 128), buffers=2
  # A static ds is a static slice.
  # CHECK-NEXT:   copy_start x[0:8] -> buf[0], sems[0]
  copy_start x[ds(0, 8)] -> buf[0], sems[0]
  # CHECK-NEXT:   acc[...] = 0
  acc[...] = 0
  # range(0, 8) is range(8).
  # CHECK-NEXT:   for i in range(8) {
  for i in range(0, 8) {
    # CHECK-NEXT:     slot = i % 2
    slot = i % 2
    # i + 1 < 8 is i <= 6.
    # CHECK-NEXT:     when i <= 6 {
    when i + 1 < 8 {
      # 8 * (i + 1) is 8 * i + 8.
      # CHECK-NEXT:       copy_start x[ds(8 * i + 8, 8)] -> buf[(i + 1) % 2], sems[(i + 1) % 2]
      copy_start x[ds(8 * (i + 1), 8)] -> buf[(i + 1) % 2], sems[(i + 1) % 2]
    # CHECK-NEXT:     }
    }
    # CHECK-NEXT:     c = async_copy x[ds(8 * i, 8)] -> buf[slot], sems[slot]
    c = async_copy x[ds(8 * i, 8)] -> buf[slot], sems[slot]
    # CHECK-NEXT:     c.wait()
    c.wait()
    # CHECK-NEXT:     buf[slot] = 2.0 * buf[slot] + 1.0
    buf[slot] = 2.0 * buf[slot] + 1.0
    # CHECK-NEXT:     acc += buf[slot]
    acc += buf[slot]
    # An affine slice with a static size is a ds.
    # CHECK-NEXT:     copy_start buf[slot] -> y[ds(8 * i, 8)], out[slot]
    copy_start buf[slot] -> y[8 * i:8 * i + 8], out[slot]
    # CHECK-NEXT:     copy_wait buf[slot] -> y[ds(8 * i, 8)], out[slot]
    copy_wait buf[slot] -> y[8 * i:8 * i + 8], out[slot]
  # CHECK-NEXT:   }
  }
  # CHECK-NEXT:   for i, j in grid(8, 3), parallel=(1,) {
  for i, j in grid(8, 3), parallel=(1,) {
    # CHECK-NEXT:     buffered_copy start w -> bw[i, j], sems[(i + j) % 2], slot=(3 * i + j) % 2
    buffered_copy start w -> bw[i, j], sems[(i + j) % 2], slot=(3 * i + j) % 2
    # CHECK-NEXT:     buffered_copy wait w -> bw[i, j], sems[(i + j) % 2], slot=(3 * i + j) % 2
    buffered_copy wait w -> bw[i, j], sems[(i + j) % 2], slot=(3 * i + j) % 2
    # A condition prints as the or of ands it is, `not` pushed down.
    # CHECK-NEXT:     when i >= 7 or j <= 0 or i == 0 {
    when not (i < 7 and j >= 1) or i == 0 {
      # CHECK-NEXT:       buffered_copy bw[i, j] -> w, slot=(3 * i + j) % 2
      buffered_copy bw[i, j] -> w, slot=(3 * i + j) % 2
    # CHECK-NEXT:     }
    }
  # CHECK-NEXT:   }
  }
  # CHECK-NEXT:   for k in range(2, 4) {
  for k in range(2, 4) {
    # CHECK-NEXT:     sm[k] = max(sm[k - 2], -sm[1])
    sm[k] = max(sm[k - 2], -sm[1])
    # CHECK-NEXT:     sm[0] -= min(sm[k], 2.5) / 4.0
    sm[0] -= min(sm[k], 2.5) / 4.0
  # CHECK-NEXT:   }
  }
  # CHECK-NEXT:   copy_start acc -> y[0:8], out[0]
  copy_start acc -> y[0:8], out[0]
  # CHECK-NEXT:   copy_wait acc -> y[0:8], out[0]
  copy_wait acc -> y[0:8], out[0]
# CHECK-NEXT: }
}
