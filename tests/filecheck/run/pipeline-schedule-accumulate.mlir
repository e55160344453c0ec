// RUN: copyir run %s --fill-inputs iota --mode eager --trace | filecheck %s

// An output whose index map ignores the inner grid axis, (i, j) -> (i,),
// over grid=(2, 2): its block stays in VMEM while j runs, so the body
// accumulates into it (initialising it at j = 0), and it is written back
// only when the block is about to change: twice, after steps 1 and 3. At
// step (1, 0) the output's block changed, so the step waits the previous
// write-back.

// CHECK:      start x[0:8, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
// CHECK-NEXT: i = 0, j = 0: start x[0:8, 128:256] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
// CHECK-NEXT: i = 0, j = 0: wait x_sems[0] 4096
// CHECK-NEXT: i = 0, j = 0: invalidate y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 0, j = 0: compute y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 0, j = 1: start x[8:16, 0:128] -> x_window[0:1, 0:8, 0:128] on x_sems[0]
// CHECK-NEXT: i = 0, j = 1: wait x_sems[1] 4096
// CHECK-NEXT: i = 0, j = 1: compute y_window[0:1, 0:8, 0:128]
// CHECK-NEXT: i = 0, j = 1: start y_window[0:1, 0:8, 0:128] -> y[0:8, 0:128] on y_sems[0]
// CHECK-NEXT: i = 1, j = 0: start x[8:16, 128:256] -> x_window[1:2, 0:8, 0:128] on x_sems[1]
// CHECK-NEXT: i = 1, j = 0: wait x_sems[0] 4096
// CHECK-NEXT: i = 1, j = 0: invalidate y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 1, j = 0: compute y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 1, j = 0: wait y_sems[0] 4096
// CHECK-NEXT: i = 1, j = 1: wait x_sems[1] 4096
// CHECK-NEXT: i = 1, j = 1: compute y_window[1:2, 0:8, 0:128]
// CHECK-NEXT: i = 1, j = 1: start y_window[1:2, 0:8, 0:128] -> y[8:16, 0:128] on y_sems[1]
// CHECK-NEXT: wait y_sems[1] 4096
// CHECK-NEXT: ran rowsum: 6 DMAs, eager mode; final values:

copy.kernel @rowsum(%x: !copy.ref<16x256xf32, hbm>, %y: !copy.ref<16x128xf32, hbm>) {
  copy.pipeline grid(2, 2) in %x : !copy.ref<16x256xf32, hbm> block [8, 128] index affine_map<(d0, d1) -> (d0, d1)> buffers 2, out %y : !copy.ref<16x128xf32, hbm> block [8, 128] index affine_map<(d0, d1) -> (d0, 0)> buffers 2 (%xw, %yw, %i, %j) {
    copy.when [affine_set<(d0) : (d0 == 0)>](%j) {
      copy.compute %yw (%xw) : !copy.ref<8x128xf32, vmem>, !copy.ref<8x128xf32, vmem> {
      ^bb0(%a0: f32):
        scalar.yield %a0 : f32
      }
    }
    copy.when [affine_set<(d0) : (d0 - 1 >= 0)>](%j) {
      copy.compute %yw (%yw, %xw) : !copy.ref<8x128xf32, vmem>, !copy.ref<8x128xf32, vmem>, !copy.ref<8x128xf32, vmem> {
      ^bb0(%a0: f32, %a1: f32):
        %e0 = scalar.add %a0, %a1 : f32
        scalar.yield %e0 : f32
      }
    }
  }
}
