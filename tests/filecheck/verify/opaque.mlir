// RUN: copyir verify --split-input-file --verify-diagnostics %s

// The MLIR form reaches the same messages: its types are taken as written,
// so a semaphore among the refs is the op's own message, at the op.

copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  %s = copy.semaphore : !copy.sem
  // expected-error@+1 {{an opaque computation expects a ref as output, but s is a semaphore}}
  copy.opaque "exp" (%a) -> (%s) : !copy.ref<8xf32, vmem> -> !copy.sem
}

// -----

copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{Loads are only allowed on VMEM and SMEM references.}}
  "copy.opaque"(%x, %a) <{what = "exp", operandSegmentSizes = array<i32: 1, 1>}> : (!copy.ref<8xf32, hbm>, !copy.ref<8xf32, vmem>) -> ()
}
