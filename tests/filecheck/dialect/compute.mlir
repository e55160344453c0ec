// RUN: copyir verify --emit mlir --no-debuginfo %s | filecheck %s
// RUN: copyir verify --emit mlir %s | copyir verify --input-format mlir --emit mlir --no-debuginfo - | filecheck %s
// RUN: copyir verify --emit cpy %s | filecheck %s --check-prefix=CPY
// RUN: xdsl-opt %s | filecheck %s

// A computation is a region of scalar ops, one per operation: a block
// argument per input (an element of the destination's dtype), a yield of
// the element it stores. Every scalar op prints in its custom form, the
// generic form reads back into it, and the authoring syntax writes the
// region as the expression it is.

// CHECK-LABEL: copy.kernel @every_operation(
copy.kernel @every_operation(%x : !copy.ref<8xf32, hbm>, %y : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  %b = copy.alloc : !copy.ref<8xf32, vmem>
  copy.sync_copy %x -> %a : (!copy.ref<8xf32, hbm>) -> (!copy.ref<8xf32, vmem>)
  // CHECK:      copy.compute %b (%a, %a) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
  // CHECK-NEXT: ^bb0(%p: f32, %q: f32):
  // CHECK-NEXT:   %two = scalar.constant "2.0" : f32
  // CHECK-NEXT:   %0 = scalar.mul %two, %p : f32
  // CHECK-NEXT:   %1 = scalar.add %0, %q : f32
  // CHECK-NEXT:   %2 = scalar.sub %1, %q : f32
  // CHECK-NEXT:   %3 = scalar.div %2, %two : f32
  // CHECK-NEXT:   %4 = scalar.max %3, %p : f32
  // CHECK-NEXT:   %5 = scalar.min %4, %q : f32
  // CHECK-NEXT:   %6 = scalar.neg %5 : f32
  // CHECK-NEXT:   scalar.yield %6 : f32
  // CHECK-NEXT: }
  // CPY: b[...] = -min(max((2.0 * a + a - a) / 2.0, a), a)
  copy.compute %b (%a, %a) : !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem> {
  ^bb0(%p: f32, %q: f32):
    %two = scalar.constant "2.0" : f32
    %0 = scalar.mul %two, %p : f32
    %1 = scalar.add %0, %q : f32
    %2 = "scalar.sub"(%1, %q) : (f32, f32) -> f32
    %3 = scalar.div %2, %two : f32
    %4 = scalar.max %3, %p : f32
    %5 = scalar.min %4, %q : f32
    %6 = scalar.neg %5 : f32
    scalar.yield %6 : f32
  }
  // CHECK:      copy.compute %a () : !copy.ref<8xf32, vmem> {
  // CHECK-NEXT:   %{{.*}} = scalar.constant "1e3" : f32
  // CHECK-NEXT:   scalar.yield
  // CHECK-NEXT: }
  // CPY: a[...] = 1e3
  "copy.compute"(%a) ({
    %c = "scalar.constant"() <{literal = "1e3"}> : () -> f32
    "scalar.yield"(%c) : (f32) -> ()
  }) : (!copy.ref<8xf32, vmem>) -> ()
  copy.sync_copy %b -> %y : (!copy.ref<8xf32, vmem>) -> (!copy.ref<8xf32, hbm>)
}

// A region's values take no names in the authoring syntax: the value after
// it is the first made-up name.
// CHECK-LABEL: copy.kernel @names(
// CPY-LABEL: kernel names(
copy.kernel @names(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  // CPY-NEXT: a = alloc f32[8] @vmem
  // CPY-NEXT: a[...] = 1.0
  // CPY-NEXT: v0 = alloc f32[8] @vmem
  copy.compute %a () : !copy.ref<8xf32, vmem> {
    %v0 = scalar.constant "1.0" : f32
    scalar.yield %v0 : f32
  }
  %0 = copy.alloc : !copy.ref<8xf32, vmem>
  copy.sync_copy %a -> %0 : (!copy.ref<8xf32, vmem>) -> (!copy.ref<8xf32, vmem>)
}
