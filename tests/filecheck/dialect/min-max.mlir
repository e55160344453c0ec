// RUN: copyir verify --input-format mlir --emit mlir %s | filecheck %s
// RUN: copyir verify --input-format mlir --emit cpy %s | filecheck %s --check-prefix=CPY

// The generic form of a min: `combine = #copy<combine min>` beside the map,
// printed back in the custom form.

// CHECK: %m = copy.index min affine_map<(d0) -> ((d0 * 128), 872)>(%i)
// CHECK: %n = copy.index max affine_map<(d0, d1) -> (d0, d1, 3)>(%i, %m)
// CPY: m = min(128 * i, 872)
// CPY: n = max(i, m, 3)
copy.kernel @k(%x : !copy.ref<1000x128xf32, hbm>) {
  copy.for %i in range(0, 8) {
    %m = "copy.index"(%i) <{map = affine_map<(d0) -> (d0 * 128, 872)>, combine = #copy<combine min>}> : (index) -> index
    %n = "copy.index"(%i, %m) <{map = affine_map<(d0, d1) -> (d0, d1, 3)>, combine = #copy<combine max>}> : (index, index) -> index
  }
}
