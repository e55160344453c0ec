// In the MLIR form a value can be named before the op that defines it;
// copyir checks that every operand is defined before its use.

copy.kernel @used_before_defined(%x : !copy.ref<8x128xf32, hbm>) {
  %buf = copy.alloc : !copy.ref<8x128xf32, vmem>
  // expected-error@+1 {{s is used before its definition}}
  copy.dma "start" %x, %buf, %s : !copy.ref<8x128xf32, hbm>, !copy.ref<8x128xf32, vmem>, !copy.sem
  %s = copy.semaphore : !copy.sem
}
