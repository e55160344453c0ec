# RUN: copyir verify --emit cpy %s | filecheck %s
# RUN: copyir verify --emit mlir %s | filecheck %s --check-prefix=MLIR
# RUN: copyir verify --emit mlir %s | copyir verify --input-format mlir --emit cpy - | filecheck %s

# min and max of index expressions print back as written, inline or named,
# and survive a trip through the MLIR form (`copy.index min`, as MLIR's
# affine.min: the least of the map's results).

# CHECK-LABEL: kernel clamps(
kernel clamps(x: f32[1000, 128] @hbm, y: f32[1000, 128] @hbm) {
  buf = alloc f32[128, 128] @vmem
  s = semaphore
  # CHECK: for i in range(8) {
  for i in range(8) {
    # MLIR: %start = copy.index min affine_map<(d0) -> ((d0 * 128), 872)>(%i)
    # CHECK-NEXT: start = min(128 * i, 872)
    start = min(128 * i, 872)
    # MLIR: %low = copy.index max affine_map<(d0) -> (((d0 * 128) + -64), 0, (d0 * 8))>(%i)
    # CHECK-NEXT: low = max(128 * i - 64, 0, 8 * i)
    low = max(128 * i - 64, 0, 8 * i)
    # A min of a named max, and arithmetic on a named min.
    # CHECK-NEXT: copy_start x[ds(min(low, 872), 128)] -> buf, s
    copy_start x[ds(min(low, 872), 128)] -> buf, s
    # CHECK-NEXT: copy_wait x[ds(start, 128)] -> buf, s
    copy_wait x[ds(start, 128)] -> buf, s
    # CHECK-NEXT: c = min(i, 6)
    c = min(i, 6)
    # CHECK-NEXT: sync_copy buf -> y[ds(128 * c + 104, 128)]
    sync_copy buf -> y[ds(128 * c + 104, 128)]
    # A condition on a named min.
    # CHECK-NEXT: m = min(i, 3)
    m = min(i, 3)
    # CHECK-NEXT: when m == 3 {
    when m == 3 {
      # CHECK-NEXT: sync_copy buf -> y[0:128]
      sync_copy buf -> y[0:128]
    }
  }
}
