# RUN: copyir verify --split-input-file --verify-diagnostics %s

# Every verifier error of the authoring syntax, one small program each,
# next to the exact message it must produce (mlir-opt's invalid.mlir style).

# alloc makes VMEM or SMEM scratch; HBM arrays are kernel parameters.

kernel alloc_in_hbm(x: f32[8, 128] @hbm) {
  # expected-error@+1 {{alloc buf must be in vmem or smem, got f32[8, 128] @hbm}}
  buf = alloc f32[8, 128] @hbm
}

# -----

# A BufferedRef needs at least one buffer.

kernel bad_buffers(x: f32[64, 128] @hbm) {
  # expected-error@+1 {{buffers must be >= 1, got 0}}
  bx = buffered_ref x, block=(32, 128), buffers=0
}

# -----

# Every dimension of a ref is at least 1.

kernel bad_dimension(x: f32[8, 128] @hbm) {
  # expected-error@+1 {{Every dimension of a ref must be >= 1, got f32[8, 0] @vmem}}
  buf = alloc f32[8, 0] @vmem
}

# -----

# DMA priority is 0 or 1.

kernel bad_priority(x: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{DMA priority must be 0 or 1, got 2}}
  copy_start x -> buf, s, priority=2
}

# -----

# Block indices: one per dimension of the windowed array.

kernel block_index_count(x: f32[64, 128] @hbm) {
  bx = buffered_ref x, block=(32, 128), buffers=2
  # expected-error@+1 {{bx takes 2 block indices, got 1}}
  buffered_copy x -> bx[1], slot=0
}

# -----

# Block indices are checked against the grid: 1000 rows in blocks of 128
# make 8 blocks (0 to 7), the last one ragged.

kernel block_index_out_of_bounds(x: f32[1000, 384] @hbm) {
  bx = buffered_ref x, block=(128, 128), buffers=2
  # expected-error@+1 {{Block index 8 is out of bounds in dimension 0: the grid of bx has 8 blocks there}}
  buffered_copy x -> bx[8, 0], slot=0
}

# -----

# A block shape has one entry per dimension of the array.

kernel block_rank(x: f32[64, 128] @hbm) {
  # expected-error@+1 {{Block shape (64,) has rank 1 but the array has rank 2}}
  bx = buffered_ref x, block=(64,), buffers=2
}

# -----

# A block dimension must lie between 1 and the array's dimension.

kernel block_size(x: f32[64, 128] @hbm) {
  # expected-error@+1 {{Block size 256 in dimension 1 must be between 1 and the array's extent 128}}
  bx = buffered_ref x, block=(64, 256), buffers=2
}

# -----

# buffered_copy copies between a plain ref and a window: two BufferedRefs
# is one too many.

kernel both_buffered(x: f32[256, 128] @hbm) {
  bx = buffered_ref x, block=(128, 128), buffers=2
  by = buffered_ref x, block=(128, 128), buffers=2
  # expected-error@+1 {{Only one of src or dst can be a BufferedRef.}}
  buffered_copy bx[0, 0] -> by, slot=0
}

# -----

# A name is defined once in a kernel.

kernel defined_twice(x: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  # expected-error@+1 {{buf is defined twice (first at line 98)}}
  buf = alloc f32[8, 128] @smem
}

# -----

# A DMA whose source and destination overlap is an error.

kernel dma_overlap(x: f32[64, 128] @hbm) {
  s = semaphore
  # expected-error@+1 {{DMA source x[0:32, 0:128] and destination x[16:48, 0:128] overlap}}
  copy_start x[0:32, :] -> x[16:48, :], s
}

# -----

# A DMA moves equal element types: Mosaic's message, verbatim (no full stop).

kernel dtype_mismatch(x: f32[8, 128] @hbm) {
  buf = alloc i32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{DMA source and target element type mismatch}}
  copy_start x -> buf, s
  copy_wait x -> buf, s
}

# -----

# A record names each key once.

kernel duplicate_key(a: f32[8] @hbm, b: f32[8] @hbm) {
  va = alloc f32[8] @vmem
  vb = alloc f32[8] @vmem
  # expected-error@+1 {{Key x appears twice in a record}}
  sync_copy {x: a, x: b} -> {x: va, y: vb}
}

# -----

# A slice must cover at least one element.

kernel empty_slice(x: f32[64] @hbm) {
  buf = alloc f32[32] @vmem
  s = semaphore
  # expected-error@+1 {{Empty slice 8:8 in dimension 0 of x[8:8]}}
  copy_start x[8:8] -> buf[0:0], s
}

# -----

# An integer index must lie inside its dimension.

kernel index_out_of_bounds(x: f32[4, 128] @hbm) {
  buf = alloc f32[128] @vmem
  s = semaphore
  # expected-error@+1 {{Index 4 is out of bounds for dimension 0 of x (size 4)}}
  copy_start x[4] -> buf, s
}

# -----

# Block indices go on the BufferedRef's side of a buffered_copy.

kernel indices_on_plain_ref(x: f32[64, 128] @hbm) {
  bx = buffered_ref x, block=(32, 128), buffers=2
  # expected-error@+1 {{Block indices belong on the BufferedRef bx, not on x}}
  buffered_copy x[1, 0] -> bx, slot=0
}

# -----

# A non-trivial window needs block indices.

kernel missing_block_indices(x: f32[64, 128] @hbm) {
  bx = buffered_ref x, block=(32, 128), buffers=2
  # expected-error@+1 {{buffered_copy needs block indices on bx}}
  buffered_copy x -> bx, slot=0
}

# -----

# Negative indices (numpy's count-from-the-end) are not supported.

kernel negative_index(x: f32[4, 128] @hbm) {
  buf = alloc f32[128] @vmem
  s = semaphore
  # expected-error@+1 {{Negative index -1 in x[-1] is not supported}}
  copy_start x[-1] -> buf, s
}

# -----

# buffered_copy needs a BufferedRef on one side (Pallas' pipeline sync_copy
# says so too): here both sides are plain refs.

kernel neither_buffered(x: f32[128, 128] @hbm) {
  buf = alloc f32[128, 128] @vmem
  # expected-error@+1 {{One of src or dst must be a BufferedRef.}}
  buffered_copy x -> buf, slot=0
}

# -----

# A ref larger than its memory space: VMEM holds 128 MiB in the default
# target, and this buffer needs 256 MiB.

kernel over_capacity(x: f32[8, 128] @hbm) {
  # expected-error@+1 {{buf needs 268435456 bytes of vmem, more than its capacity of 134217728 bytes in target default}}
  buf = alloc f32[65536, 1024] @vmem
}

# -----

# Kernel parameters live in HBM; scratch comes from alloc.

kernel param_not_hbm(x: f32[8, 128] @hbm,
                     # expected-error@+1 {{Kernel parameter y must be in hbm, got f32[8, 128] @vmem}}
                     y: f32[8, 128] @vmem) {
  sync_copy x -> y
}

# -----

# A ref is not a semaphore: the third operand of a DMA must be one.

kernel ref_as_semaphore(x: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  t = alloc f32[8] @vmem
  # expected-error@+1 {{copy_start expects a semaphore as sem, but t is f32[8] @vmem}}
  copy_start x -> buf, t
}

# -----

# A semaphore is not a ref: it cannot be the source of a DMA.

kernel semaphore_as_ref(x: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  # expected-error@+1 {{copy_start expects a ref as src, but s is a semaphore}}
  copy_start s -> buf, s
}

# -----

# A DMA moves equal shapes: Mosaic's message, verbatim.

kernel shape_mismatch(x: f32[16, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{DMA source and target shape mismatch.}}
  copy_start x -> buf, s
  copy_wait x -> buf, s
}

# -----

# Static views are checked against the ref's shape; copyir never clips a
# slice the way numpy does.

kernel slice_out_of_bounds(x: f32[64, 128] @hbm) {
  buf = alloc f32[32, 128] @vmem
  s = semaphore
  # expected-error@+1 {{Slice 48:80 is out of bounds for dimension 0 of x (size 64)}}
  copy_start x[48:80, :] -> buf, s
}

# -----

# Views are unit-step slices: steps are not supported.

kernel slice_step(x: f32[64] @hbm) {
  buf = alloc f32[32] @vmem
  s = semaphore
  # expected-error@+1 {{Slice steps are not supported: x[0:64:2]}}
  copy_start x[0:64:2] -> buf, s
}

# -----

# A window has `buffers` slots, numbered from 0.

kernel slot_out_of_range(x: f32[64, 128] @hbm) {
  bx = buffered_ref x, block=(32, 128), buffers=2
  # expected-error@+1 {{Slot 2 is out of range for bx with 2 buffers}}
  buffered_copy x -> bx[1, 0], slot=2
}

# -----

# A syntax error is a located diagnostic too.

kernel syntax_error(x: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  # expected-error@+1 {{unexpected end of line; expected ','}}
  copy_start x -> buf
}

# -----

# A view takes at most one index per dimension.

kernel too_many_indices(x: f32[8, 128] @hbm) {
  buf = alloc f32[128] @vmem
  s = semaphore
  # expected-error@+1 {{x has rank 2 but is indexed with 3 indices}}
  copy_start x[0, 1, 2] -> buf, s
}

# -----

# sync_copy needs two pytrees of the same structure: a tuple is not a list.

kernel tree_mismatch(a: f32[8] @hbm, b: f32[8] @hbm) {
  va = alloc f32[8] @vmem
  vb = alloc f32[8] @vmem
  # expected-error@+1 {{sync_copy trees differ in structure: (a, b) vs [va, vb]}}
  sync_copy (a, b) -> [va, vb]
}

# -----

# Every name must be defined before it is used.

kernel undefined_name(x: f32[8, 128] @hbm) {
  s = semaphore
  # expected-error@+1 {{buf is not defined}}
  copy_start x -> buf, s
}

# -----

# A semaphore array must be indexed to give one semaphore.

kernel unindexed_semaphore_array(x: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  sems = semaphore[2]
  # expected-error@+1 {{copy_start expects a semaphore as sem, but sems is an array semaphore[2]; index it}}
  copy_start x -> buf, sems
}

# -----

# The action form names a DMA action by string: exactly `start` or `wait`.
# `Start` is not `start` (Pallas' _copy_start_or_wait raises the same).

kernel unknown_action(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{Unknown action: Start}}
  dma Start x -> buf, s
}

# -----

# An empty action string is not an action either.

kernel unknown_action_empty(x: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  # expected-error@+1 {{Unknown action: }}
  dma "" x -> buf, s
}

# -----

# Element types: bool, i8, i16, i32, i64, u8, u16, u32, f16, f32, f64, bf16
# (or their numpy names, float32 and so on).

kernel unknown_dtype(x: f32[8, 128] @hbm) {
  # expected-error@+1 {{Unknown dtype: f8 (expected one of bool, i8, i16, i32, i64, u8, u16, u32, f16, f32, f64, bf16)}}
  buf = alloc f8[8, 128] @vmem
}

# -----

# Each statement takes its own options: copy_start takes add and priority.

kernel unknown_option(x: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  s = semaphore
  # expected-error@+1 {{Unknown option slot for copy_start (expected add or priority)}}
  copy_start x -> buf, s, slot=1
}

# -----

# Memory spaces are hbm (or its alias any), vmem and smem.

kernel unknown_space(x: f32[8, 128] @hbm) {
  # expected-error@+1 {{Unknown memory space: vram (expected hbm, any, vmem or smem)}}
  buf = alloc f32[8, 128] @vram
}

# -----

# add and priority belong to a DMA start; a wait only names the descriptor.

kernel wait_options(x: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  copy_start x -> buf, s, add
  # expected-error@+1 {{add applies to a DMA start, not to a wait}}
  copy_wait x -> buf, s, add
}

# -----

# A BufferedRef windows arrays of one shape and dtype.

kernel windowed_array_mismatch(x: f32[64, 128] @hbm, y: f32[32, 128] @hbm) {
  bx = buffered_ref x, block=(32, 128), buffers=2
  # expected-error@+1 {{buffered_copy: y is f32[32, 128] @hbm, but bx windows f32[64, 128]}}
  buffered_copy y -> bx[0, 0], slot=0
}
