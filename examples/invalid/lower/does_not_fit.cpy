# Each buffer fits VMEM on its own (the verifier checks that), but not all
# together: assign-addresses lays them out in program order and reports the
# first that does not fit, with its size and the space's free bytes.

kernel does_not_fit(x: f32[8, 128] @hbm) {
  a = alloc f32[16384, 1024] @vmem       # 64 MiB
  b = alloc f32[12288, 1024] @vmem       # 48 MiB
  # expected-error@+1 {{c needs 33554432 bytes of vmem, but only 16777216 of its 134217728 bytes are free in target default}}
  c = alloc f32[8192, 1024] @vmem        # 32 MiB: 16 MiB too many
}
