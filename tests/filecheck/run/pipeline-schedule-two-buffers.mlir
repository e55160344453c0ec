// RUN: copyir run %s --fill-inputs iota --mode eager --trace | filecheck %s

// Pallas' schedule (jax/_src/pallas/mosaic/pipeline.py) for grid=(4,), one
// input and one output with 2 buffers each, as Pallas' interpret mode ran it
// (jax 0.10.2): the prologue fetches block 0; each step fetches the next
// step's block, waits its own, runs the body, starts its write-back and
// waits the previous step's; the epilogue waits the last write-back. Every
// wait is 4096 bytes, one (8, 128) f32 block. `invalidate` marks an output
// window unwritten at a block's first visit (a body that reads it before
// writing is caught); it moves no data.

// CHECK:      start x[0:8, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
// CHECK-NEXT: i = 0: start x[8:16, 0:128] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
// CHECK-NEXT: i = 0: wait x_sems[0] 4096
// CHECK-NEXT: i = 0: invalidate y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 0: compute y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 0: start y_window[0:1, 0:8, 0:128] -> y[0:8, 0:128] on y_sems[0]
// CHECK-NEXT: i = 1: start x[16:24, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
// CHECK-NEXT: i = 1: wait x_sems[1] 4096
// CHECK-NEXT: i = 1: invalidate y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 1: compute y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 1: start y_window[1:2, 0:8, 0:128] -> y[8:16, 0:128] on y_sems[1]
// CHECK-NEXT: i = 1: wait y_sems[0] 4096
// CHECK-NEXT: i = 2: start x[24:32, 0:128] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
// CHECK-NEXT: i = 2: wait x_sems[0] 4096
// CHECK-NEXT: i = 2: invalidate y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 2: compute y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 2: start y_window[0:1, 0:8, 0:128] -> y[16:24, 0:128] on y_sems[0]
// CHECK-NEXT: i = 2: wait y_sems[1] 4096
// CHECK-NEXT: i = 3: wait x_sems[1] 4096
// CHECK-NEXT: i = 3: invalidate y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 3: compute y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 3: start y_window[1:2, 0:8, 0:128] -> y[24:32, 0:128] on y_sems[1]
// CHECK-NEXT: i = 3: wait y_sems[0] 4096
// CHECK-NEXT: wait y_sems[1] 4096
// CHECK-NEXT: ran scale: 8 DMAs, eager mode; final values:

copy.kernel @scale(%x: !copy.ref<32x128xf32, hbm>, %y: !copy.ref<32x128xf32, hbm>) {
  copy.pipeline grid(4) in %x : !copy.ref<32x128xf32, hbm> block [8, 128] index affine_map<(d0) -> (d0, 0)> buffers 2, out %y : !copy.ref<32x128xf32, hbm> block [8, 128] index affine_map<(d0) -> (d0, 0)> buffers 2 (%xw, %yw, %i) {
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
