# DMAs that add: with `add`, the destination receives dst + src instead of
# src. Here out = a + b, summed in VMEM by two DMAs into one buffer.

kernel accumulate(a: f32[8, 128] @hbm, b: f32[8, 128] @hbm, out: f32[8, 128] @hbm) {
  acc = alloc f32[8, 128] @vmem
  s = semaphore
  copy_start a -> acc, s
  copy_wait a -> acc, s
  copy_start b -> acc, s, add       # acc += b
  copy_wait b -> acc, s
  sync_copy acc -> out
}
