// RUN: copyir run %s --fill-inputs iota --mode eager --trace | filecheck %s

// With 3 input buffers the prologue starts the fetches of the first two
// steps, and step s fetches the block of step s + 2 (none at steps 2 and 3,
// past the grid's end); the output keeps 2 buffers.

// CHECK:      start x[0:8, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
// CHECK-NEXT: start x[8:16, 0:128] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
// CHECK-NEXT: i = 0: start x[16:24, 0:128] -> x_window[2:3, 0:8, 0:128] on x_sems[2]
// CHECK-NEXT: i = 0: wait x_sems[0] 4096
// CHECK-NEXT: i = 0: invalidate y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 0: compute y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 0: start y_window[0:1, 0:8, 0:128] -> y[0:8, 0:128] on y_sems[0]
// CHECK-NEXT: i = 1: start x[24:32, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
// CHECK-NEXT: i = 1: wait x_sems[1] 4096
// CHECK-NEXT: i = 1: invalidate y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 1: compute y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 1: start y_window[1:2, 0:8, 0:128] -> y[8:16, 0:128] on y_sems[1]
// CHECK-NEXT: i = 1: wait y_sems[0] 4096
// CHECK-NEXT: i = 2: wait x_sems[2] 4096
// CHECK-NEXT: i = 2: invalidate y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 2: compute y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 2: start y_window[0:1, 0:8, 0:128] -> y[16:24, 0:128] on y_sems[0]
// CHECK-NEXT: i = 2: wait y_sems[1] 4096
// CHECK-NEXT: i = 3: wait x_sems[0] 4096
// CHECK-NEXT: i = 3: invalidate y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 3: compute y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 3: start y_window[1:2, 0:8, 0:128] -> y[24:32, 0:128] on y_sems[1]
// CHECK-NEXT: i = 3: wait y_sems[0] 4096
// CHECK-NEXT: wait y_sems[1] 4096
// CHECK-NEXT: ran scale: 8 DMAs, eager mode; final values:

copy.kernel @scale(%x: !copy.ref<32x128xf32, hbm>, %y: !copy.ref<32x128xf32, hbm>) {
  copy.pipeline grid(4) in %x : !copy.ref<32x128xf32, hbm> block [8, 128] index affine_map<(d0) -> (d0, 0)> buffers 3, out %y : !copy.ref<32x128xf32, hbm> block [8, 128] index affine_map<(d0) -> (d0, 0)> buffers 2 (%xw, %yw, %i) {
    copy.compute %yw (%xw) : !copy.ref<8x128xf32, vmem>, !copy.ref<8x128xf32, vmem> {
    ^bb0(%a0: f32):
      %e0 = scalar.constant "2.0" : f32
      %e1 = scalar.mul %e0, %a0 : f32
      %e2 = scalar.constant "1.0" : f32
      %e3 = scalar.add %e1, %e2 : f32
      scalar.yield %e3 : f32
    }
  }
}
