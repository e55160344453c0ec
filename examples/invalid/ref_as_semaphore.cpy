# A ref is not a semaphore: the third operand of a DMA must be one.

kernel ref_as_semaphore(x: f32[8] @hbm) {
  buf = alloc f32[8] @vmem
  t = alloc f32[8] @vmem
  # expected-error@+1 {{copy_start expects a semaphore as sem, but t is f32[8] @vmem}}
  copy_start x -> buf, t
}
