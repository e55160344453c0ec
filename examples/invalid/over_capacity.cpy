# A ref larger than its memory space: VMEM holds 128 MiB in the default
# target, and this buffer needs 256 MiB.

kernel over_capacity(x: f32[8, 128] @hbm) {
  # expected-error@+1 {{buf needs 268435456 bytes of vmem, more than its capacity of 134217728 bytes in target default}}
  buf = alloc f32[65536, 1024] @vmem
}
