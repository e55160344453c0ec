// RUN: copyir verify --split-input-file --verify-diagnostics %s

// Errors of the MLIR form: the verifier's messages are the same as for the
// authoring syntax; parse errors are located diagnostics too.

copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>) {
  %buf = copy.alloc : !copy.ref<8x128xf32, vmem>
  %s = copy.semaphore : !copy.sem
  // expected-error@+1 {{Unknown action: Start}}
  copy.dma "Start" %x, %buf, %s : !copy.ref<8x128xf32, hbm>, !copy.ref<8x128xf32, vmem>, !copy.sem
}

// -----

// The action as an enum attribute: a word that names none is the same
// message, at the word.
copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>) {
  %buf = copy.alloc : !copy.ref<8x128xf32, vmem>
  %s = copy.semaphore : !copy.sem
  // expected-error@+1 {{Unknown action: Wait}}
  "copy.dma"(%x, %buf, %s) <{action = #copy<action Wait>}> : (!copy.ref<8x128xf32, hbm>, !copy.ref<8x128xf32, vmem>, !copy.sem) -> ()
}

// -----

copy.kernel @k(%x : !copy.ref<16x128xf32, hbm>) {
  %buf = copy.alloc : !copy.ref<8x128xf32, vmem>
  %s = copy.semaphore : !copy.sem
  // expected-error@+1 {{DMA source and target shape mismatch.}}
  copy.dma "start" %x, %buf, %s : !copy.ref<16x128xf32, hbm>, !copy.ref<8x128xf32, vmem>, !copy.sem
}

// -----

copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>) {
  %buf = copy.alloc : !copy.ref<8x128xi32, vmem>
  %s = copy.semaphore : !copy.sem
  // expected-error@+1 {{DMA source and target element type mismatch}}
  copy.dma "start" %x, %buf, %s : !copy.ref<8x128xf32, hbm>, !copy.ref<8x128xi32, vmem>, !copy.sem
}

// -----

copy.kernel @k(%x : !copy.ref<128x128xf32, hbm>) {
  %buf = copy.alloc : !copy.ref<128x128xf32, vmem>
  // expected-error@+1 {{One of src or dst must be a BufferedRef.}}
  copy.buffered_copy %x -> %buf[0, 0] : !copy.ref<128x128xf32, hbm> -> !copy.ref<128x128xf32, vmem>
}

// -----

copy.kernel @k(%x : !copy.ref<256x128xf32, hbm>) {
  %a = copy.buffered_ref : !copy.buffered<256x128xf32, [128, 128], buffers 2, vmem>
  %b = copy.buffered_ref : !copy.buffered<256x128xf32, [128, 128], buffers 2, vmem>
  // expected-error@+1 {{Only one of src or dst can be a BufferedRef.}}
  copy.buffered_copy %a[0, 0] -> %b : !copy.buffered<256x128xf32, [128, 128], buffers 2, vmem> -> !copy.buffered<256x128xf32, [128, 128], buffers 2, vmem>
}

// -----

copy.kernel @k(%a : !copy.ref<8xf32, hbm>) {
  %va = copy.alloc : !copy.ref<8xf32, vmem>
  // expected-error@+1 {{Malformed pytree spec '((*': expected ',' or ')'}}
  "copy.sync_copy"(%a, %va) <{src_tree = "((*", dst_tree = "*", operandSegmentSizes = array<i32: 1, 1>}> : (!copy.ref<8xf32, hbm>, !copy.ref<8xf32, vmem>) -> ()
}

// -----

copy.kernel @k(%x : !copy.ref<64x128xf32, hbm>) {
  %s = copy.semaphore : !copy.sem
  %a = copy.view %x[0:32, 0:128] : !copy.ref<64x128xf32, hbm>
  %b = copy.view %x[16:48] : !copy.ref<64x128xf32, hbm>
  // expected-error@+1 {{DMA source a and destination b overlap}}
  copy.dma "start" %a, %b, %s : !copy.ref<32x128xf32, hbm>, !copy.ref<32x128xf32, hbm>, !copy.sem
}

// -----

copy.kernel @k(%x : !copy.ref<64x128xf32, hbm>) {
  // expected-error@+1 {{Negative index -3 in x[-3:29] is not supported}}
  %a = copy.view %x[-3:29] : !copy.ref<64x128xf32, hbm>
}

// -----

copy.kernel @k(%x : !copy.ref<64x128xf32, hbm>) {
  // expected-error@+1 {{Slice steps are not supported: 0:8:...}}
  %a = copy.view %x[0:8:2] : !copy.ref<64x128xf32, hbm>
}

// -----

// expected-error@+1 {{Unknown memory space: vram (expected hbm, any, vmem or smem)}}
copy.kernel @k(%x : !copy.ref<64x128xf32, vram>) {
}

// -----

// expected-error@+1 {{Unknown dtype: index (expected one of bool, i8, i16, i32, i64, u8, u16, u32, f16, f32, f64, bf16)}}
copy.kernel @k(%x : !copy.ref<64xindex, hbm>) {
}

// -----

// expected-error@+1 {{Kernel parameter x must be in hbm, got f32[64] @vmem}}
copy.kernel @k(%x : !copy.ref<64xf32, vmem>) {
}

// -----

copy.kernel @k(%x : !copy.ref<64xf32, hbm>) {
  // expected-error@+1 {{Operation copy.bogus is not registered}}
  copy.bogus
}

// -----

// expected-error@+1 {{Only kernels may appear at the top level, got copy.alloc}}
%b = copy.alloc : !copy.ref<8xf32, vmem>

// -----

// expected-error@+1 {{The top-level module takes no block arguments}}
"builtin.module"() ({
^bb0(%a: i32):
  copy.kernel @k() {}
}) : () -> ()

// -----

// An index expression that divides by zero has no value (MLIR leaves it
// undefined).
copy.kernel @k(%x : !copy.ref<16xf32, hbm>, %y : !copy.ref<16xf32, hbm>) {
  copy.for %i in range(0, 8) {
    // expected-error@+1 {{An index expression divides by zero}}
    %0 = copy.index affine_map<(d0) -> (d0 mod 0)>(%i)
    %v = copy.view %x[%0] : !copy.ref<16xf32, hbm>
    %1 = copy.view %y[0] : !copy.ref<16xf32, hbm>
    copy.sync_copy %v -> %1 : (!copy.ref<f32, hbm>) -> (!copy.ref<f32, hbm>)
  }
}

// -----

// A constant that divides by zero, which xDSL's parser folds as it reads.
builtin.module {
  copy.kernel @k(%x: !copy.ref<8xi32, hbm>, %y: !copy.ref<8xi32, hbm>) {
    // expected-error@+1 {{An index expression divides by zero}}
    copy.when [affine_set<() : (1 mod 0 >= 0)>]() {
      copy.sync_copy %x -> %y : (!copy.ref<8xi32, hbm>) -> (!copy.ref<8xi32, hbm>)
    }
  }
}

// -----

// A grid dimension's semantics is parallel or arbitrary, in the custom form
// and in the generic one alike.
copy.kernel @k() {
  // expected-error@+1 {{A dimension's semantics is parallel or arbitrary, not paralel}}
  copy.for %i, %j in grid(4, 2) dimension_semantics [paralel, arbitrary] {
  }
}

// -----

copy.kernel @k() {
  // expected-error@+1 {{A dimension's semantics is parallel or arbitrary, not core_parallel}}
  "copy.for"() <{lower = array<i64: 0>, upper = array<i64: 3>, dimension_semantics = [#copy<dim core_parallel>]}> ({
  ^bb0(%i: index):
  }) : () -> ()
}

// -----

// One semantics per dimension.
copy.kernel @k() {
  // expected-error@+1 {{Malformed loop: its dimension semantics and indices disagree in number}}
  copy.for %i, %j in grid(4, 2) dimension_semantics [parallel] {
  }
}

// -----

// An asynchronous window copy without a semaphore: the .cpy form's message.
copy.kernel @k(%x: !copy.ref<8x128xf32, hbm>) {
  %bx = copy.buffered_ref : !copy.buffered<8x128xf32, [8, 128], buffers 2, vmem>
  // expected-error@+1 {{buffered_copy start needs a semaphore after its destination: buffered_copy start src -> dst, sem, slot=s}}
  copy.buffered_copy "start" %x -> %bx[0, 0] : !copy.ref<8x128xf32, hbm> -> !copy.buffered<8x128xf32, [8, 128], buffers 2, vmem>
}

// -----

// Segment sizes that disagree with the operands: xDSL's message, not a
// pytree message read off lists of the wrong length.
copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>) {
  %buf = copy.alloc : !copy.ref<8x128xf32, vmem>
  // expected-error@+1 {{operand count (2) does not match with the total size (3) specified in attribute 'operandSegmentSizes'}}
  "copy.sync_copy"(%x, %buf) <{src_tree = "*", dst_tree = "*", operandSegmentSizes = array<i32: 2, 1>}> : (!copy.ref<8x128xf32, hbm>, !copy.ref<8x128xf32, vmem>) -> ()
}

// -----

// A wrongly typed result in an op's custom form reaches the verifier, which
// says it at the op, as the generic form does.
copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>) {
  // expected-error@+1 {{alloc expects a ref as result, but z is a semaphore}}
  %z = copy.alloc : !copy.sem
}

// -----

// Indexing a ref as a semaphore array: the semaphore message, not a rank.
copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>) {
  // expected-error@+1 {{sem_index expects a semaphore as source, but x is f32[8, 128] @hbm}}
  %s = "copy.sem_index"(%x) <{indices = array<i64: 1>}> : (!copy.ref<8x128xf32, hbm>) -> !copy.sem
}

// -----

// A min of one result: `copy.index min` takes the least of two or more.
copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>) {
  copy.for %i in range(0, 8) {
    // expected-error@+1 {{Malformed index value: its map (d0) -> (d0) does not take 1 indices to two or more}}
    %m = copy.index min affine_map<(d0) -> (d0)>(%i)
  }
}

// -----

// Two results and no combine: which one would be the index?
copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>) {
  copy.for %i in range(0, 8) {
    // expected-error@+1 {{Malformed index value: its map (d0) -> (d0, 3) does not take 1 indices to one}}
    %m = "copy.index"(%i) <{map = affine_map<(d0) -> (d0, 3)>}> : (index) -> index
  }
}

// -----

// An index expression nests at most 100 operations deep (a deeper one
// would exhaust Python's recursion in xDSL's hashing and printing).
copy.kernel @k(%x: !copy.ref<64x128xf32, hbm>, %y: !copy.ref<64x128xf32, hbm>) {
  // expected-error@+1 {{An index expression nests more than 100 operations deep}}
  copy.pipeline grid(8) in %x : !copy.ref<64x128xf32, hbm> block [8, 128] index affine_map<(d0) -> ((d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0 + d0) mod 8, 0)> buffers 2, out %y : !copy.ref<64x128xf32, hbm> block [8, 128] index affine_map<(d0) -> (d0, 0)> buffers 2 (%xw, %yw, %i) {
  }
}
