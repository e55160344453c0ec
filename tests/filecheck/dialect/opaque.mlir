// RUN: copyir verify --emit mlir --no-debuginfo %s | filecheck %s
// RUN: copyir verify --emit mlir %s | copyir verify --input-format mlir --emit mlir --no-debuginfo - | filecheck %s
// RUN: xdsl-opt %s | filecheck %s

// The MLIR form of an opaque computation: `what`, the refs it reads, the
// refs it writes, their types in that order; the generic form reads back
// into it, and xdsl-opt knows the op.

// CHECK-LABEL: copy.kernel @k(
copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>, %y : !copy.ref<8x128xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8x128xf32, vmem>
  %s = copy.alloc : !copy.ref<i32, smem>
  // CHECK: copy.opaque "exp" (%a, %s) -> (%a) : !copy.ref<8x128xf32, vmem>, !copy.ref<i32, smem> -> !copy.ref<8x128xf32, vmem>
  copy.opaque "exp" (%a, %s) -> (%a) : !copy.ref<8x128xf32, vmem>, !copy.ref<i32, smem> -> !copy.ref<8x128xf32, vmem>
  // CHECK-NEXT: copy.opaque "reduce_max" (%a) -> (%s) : !copy.ref<8x128xf32, vmem> -> !copy.ref<i32, smem>
  "copy.opaque"(%a, %s) <{what = "reduce_max", operandSegmentSizes = array<i32: 1, 1>}> : (!copy.ref<8x128xf32, vmem>, !copy.ref<i32, smem>) -> ()
  // CHECK-NEXT: copy.opaque "" () -> () : ->
  copy.opaque "" () -> () : ->
}
