// RUN: copyir verify --emit mlir %s | filecheck %s
// RUN: copyir verify --emit mlir %s | copyir verify --input-format mlir --emit mlir - | filecheck %s
// RUN: copyir verify --emit cpy %s | copyir verify --emit mlir - | filecheck %s --check-prefix=NOLOC

// The custom MLIR syntax of every op of the copy dialect, and its generic
// form read back into the custom one. Locations survive: ops without an
// explicit loc(...) get their line and column in this file.

// CHECK-LABEL: copy.kernel @all_ops(%x: !copy.ref<64x128xf32, hbm> loc("{{.*}}roundtrip.mlir":{{[0-9]+}}:{{[0-9]+}}), %y: !copy.ref<64x128xf32, hbm>
// NOLOC-LABEL: copy.kernel @all_ops(
copy.kernel @all_ops(%x : !copy.ref<64x128xf32, hbm>, %y : !copy.ref<64x128xf32, any>) {
  // CHECK-NEXT: %buf = copy.alloc : !copy.ref<64x128xf32, vmem> loc("{{.*}}roundtrip.mlir":[[# @LINE + 1]]:3)
  %buf = copy.alloc : !copy.ref<64x128xf32, vmem>
  // CHECK-NEXT: %s = copy.semaphore : !copy.sem loc("orig.cpy":3:5)
  %s = copy.semaphore : !copy.sem loc("orig.cpy":3:5)
  // CHECK-NEXT: %sems = copy.semaphore : !copy.sem_array<2x3>
  %sems = copy.semaphore : !copy.sem_array<2x3>
  // CHECK-NEXT: %s12 = copy.sem_index %sems[1, 2] : !copy.sem_array<2x3> -> !copy.sem
  %s12 = copy.sem_index %sems[1, 2] : !copy.sem_array<2x3> -> !copy.sem
  // CHECK-NEXT: %top = copy.view %x[0:32, 5] : !copy.ref<64x128xf32, hbm>
  %top = copy.view %x[0:32, 5] : !copy.ref<64x128xf32, hbm>
  // CHECK-NEXT: %dst = copy.view %buf[0:32, 7] : !copy.ref<64x128xf32, vmem>
  %dst = copy.view %buf[0:32, 7] : !copy.ref<64x128xf32, vmem>
  // CHECK-NEXT: copy.dma "start" %top, %dst, %s12 add priority 1 : !copy.ref<32xf32, hbm>, !copy.ref<32xf32, vmem>, !copy.sem
  copy.dma "start" %top, %dst, %s12 add priority 1 : !copy.ref<32xf32, hbm>, !copy.ref<32xf32, vmem>, !copy.sem
  // CHECK-NEXT: copy.dma "wait" %top, %dst, %s12 : !copy.ref<32xf32, hbm>, !copy.ref<32xf32, vmem>, !copy.sem
  "copy.dma"(%top, %dst, %s12) <{action = #copy<action wait>}> : (!copy.ref<32xf32, hbm>, !copy.ref<32xf32, vmem>, !copy.sem) -> ()
  // CHECK-NEXT: copy.sync_copy (%x, {a: %y}) -> (%buf, {a: %x}) add : (!copy.ref<64x128xf32, hbm>, !copy.ref<64x128xf32, hbm>) -> (!copy.ref<64x128xf32, vmem>, !copy.ref<64x128xf32, hbm>)
  copy.sync_copy (%x, {a: %y}) -> (%buf, {a: %x}) add : (!copy.ref<64x128xf32, hbm>, !copy.ref<64x128xf32, hbm>) -> (!copy.ref<64x128xf32, vmem>, !copy.ref<64x128xf32, hbm>)
  // CHECK-NEXT: copy.sync_copy () -> () : () -> ()
  copy.sync_copy () -> () : () -> ()
  // A kernel grid's BufferedRef pads its cut blocks (Pallas' own would round
  // element 16 to the 128-lane tiling and refuse it).
  // CHECK-NEXT: %bx = copy.buffered_ref padded : !copy.buffered<64x128xf32, [48, element 16], buffers 2, vmem>
  %bx = copy.buffered_ref padded : !copy.buffered<64x128xf32, [48, element 16], buffers 2, vmem>
  // CHECK-NEXT: %br = copy.buffered_ref : !copy.buffered<64x128xf32, [squeezed, 128], buffers 1, smem>
  %br = copy.buffered_ref : !copy.buffered<64x128xf32, [squeezed, 128], buffers 1, smem>
  // CHECK-NEXT: copy.buffered_copy %x -> %bx[1, 100] slot 1 : !copy.ref<64x128xf32, hbm> -> !copy.buffered<64x128xf32, [48, element 16], buffers 2, vmem>
  copy.buffered_copy %x -> %bx[1, 100] slot 1 : !copy.ref<64x128xf32, hbm> -> !copy.buffered<64x128xf32, [48, element 16], buffers 2, vmem>
  // CHECK-NEXT: copy.buffered_copy %br[63, 0] -> %y : !copy.buffered<64x128xf32, [squeezed, 128], buffers 1, smem> -> !copy.ref<64x128xf32, hbm>
  copy.buffered_copy %br[63, 0] -> %y : !copy.buffered<64x128xf32, [squeezed, 128], buffers 1, smem> -> !copy.ref<64x128xf32, hbm>
  // CHECK-NEXT: }
}

// CHECK: copy.kernel @empty(%out_1: !copy.ref<8xi1, hbm>
// NOLOC: copy.kernel @empty(%out_1: !copy.ref<8xi1, hbm>
copy.kernel @empty(%out_1 : !copy.ref<8xi1, hbm>) {}

// A grid dimension's semantics is a #copy<dim parallel> or #copy<dim
// arbitrary>, one per dimension; the custom form names them after the grid
// and leaves them out when none is given.
// CHECK-LABEL: copy.kernel @grids(
// NOLOC-LABEL: copy.kernel @grids(
copy.kernel @grids() {
  // CHECK-NEXT: copy.for %i, %j in grid(4, 2) dimension_semantics [parallel, arbitrary] {
  // NOLOC-NEXT: copy.for %i, %j in grid(4, 2) dimension_semantics [parallel, arbitrary] {
  copy.for %i, %j in grid(4, 2) dimension_semantics [parallel, arbitrary] {
  }
  // CHECK: copy.for %k in range(0, 3) dimension_semantics [parallel] {
  // NOLOC: copy.for %k in range(0, 3) dimension_semantics [parallel] {
  "copy.for"() <{lower = array<i64: 0>, upper = array<i64: 3>, dimension_semantics = [#copy<dim parallel>]}> ({
  ^bb0(%k: index):
  }) : () -> ()
  // CHECK: copy.for %l in range(0, 3) {
  // NOLOC: copy.for %l in range(0, 3) {
  copy.for %l in range(0, 3) {
  }
}
