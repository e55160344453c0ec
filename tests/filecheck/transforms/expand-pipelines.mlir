// RUN: copyir opt -p expand-pipelines --no-debuginfo %s | filecheck %s
// RUN: copyir lower --no-origins %s | filecheck %s --check-prefix=STREAM

// expand-pipelines turns a pipeline into a BufferedRef and a semaphore per
// slot for each operand, a prologue fetch, and one loop over the grid whose
// body is Pallas' phases: prefetch the next block (a `when` keeps it inside
// the grid), wait the current one, the body on the current windows, start
// the write-back, wait the previous one. Slots are counters mod the buffer
// count; the epilogue waits the last write-back.

// CHECK:      %x_window = copy.buffered_ref : !copy.buffered<32x128xf32, [8, 128], buffers 2, vmem>
// CHECK-NEXT: %x_sems = copy.semaphore : !copy.sem_array<2>
// CHECK-NEXT: %y_window = copy.buffered_ref : !copy.buffered<32x128xf32, [8, 128], buffers 2, vmem>
// CHECK-NEXT: %y_sems = copy.semaphore : !copy.sem_array<2>
// CHECK-NEXT: %0 = copy.sem_index %x_sems[0] : !copy.sem_array<2> -> !copy.sem
// CHECK-NEXT: copy.buffered_copy "start" %x -> %x_window[0, 0] sem %0
// CHECK-NEXT: copy.for %i in range(0, 4) {
// CHECK-NEXT:   copy.when [affine_set<(d0) : (((d0 * -1) + 2) >= 0)>](%i) {
// CHECK-NEXT:     %1 = copy.index affine_map<(d0) -> (((d0 + 1) mod 2))>(%i)
// CHECK-NEXT:     %2 = copy.index affine_map<(d0) -> ((d0 + 1))>(%i)
// CHECK-NEXT:     %3 = copy.sem_index %x_sems[%1] : !copy.sem_array<2> -> !copy.sem
// CHECK-NEXT:     copy.buffered_copy "start" %x -> %x_window[%2, 0] slot %1 sem %3
// CHECK-NEXT:   }
// CHECK-NEXT:   %4 = copy.index affine_map<(d0) -> ((d0 mod 2))>(%i)
// CHECK-NEXT:   %5 = copy.sem_index %x_sems[%4] : !copy.sem_array<2> -> !copy.sem
// CHECK-NEXT:   copy.buffered_copy "wait" %x -> %x_window[%i, 0] slot %4 sem %5
// CHECK-NEXT:   %xw = copy.window %x_window[%4]
// CHECK-NEXT:   %yw = copy.window %y_window[%4]
// CHECK-NEXT:   copy.invalidate %yw stale : !copy.ref<8x128xf32, vmem>
// CHECK-NEXT:   copy.compute %yw (%xw) : !copy.ref<8x128xf32, vmem>, !copy.ref<8x128xf32, vmem> {
// CHECK-NEXT:   ^bb0(%a0: f32):
// CHECK-NEXT:     %e0 = scalar.constant "2.0" : f32
// CHECK-NEXT:     %e1 = scalar.mul %e0, %a0 : f32
// CHECK-NEXT:     %e2 = scalar.constant "1.0" : f32
// CHECK-NEXT:     %e3 = scalar.add %e1, %e2 : f32
// CHECK-NEXT:     scalar.yield %e3 : f32
// CHECK-NEXT:   }
// CHECK-NEXT:   %6 = copy.sem_index %y_sems[%4] : !copy.sem_array<2> -> !copy.sem
// CHECK-NEXT:   copy.buffered_copy "start" %y_window[%i, 0] -> %y slot %4 sem %6
// CHECK-NEXT:   copy.when [affine_set<(d0) : ((d0 + -1) >= 0)>](%i) {
// CHECK-NEXT:     %7 = copy.index affine_map<(d0) -> (((d0 + -1) mod 2))>(%i)
// CHECK-NEXT:     %8 = copy.index affine_map<(d0) -> ((d0 + -1))>(%i)
// CHECK-NEXT:     %9 = copy.sem_index %y_sems[%7] : !copy.sem_array<2> -> !copy.sem
// CHECK-NEXT:     copy.buffered_copy "wait" %y_window[%8, 0] -> %y slot %7 sem %9
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: %10 = copy.sem_index %y_sems[1] : !copy.sem_array<2> -> !copy.sem
// CHECK-NEXT: copy.buffered_copy "wait" %y_window[3, 0] -> %y slot 1 sem %10

// The stream keeps the loop: its size does not depend on the grid's.
// STREAM:      dma.loop "i" 4 {
// STREAM-COUNT-6: dma.
// STREAM-NEXT: }

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
