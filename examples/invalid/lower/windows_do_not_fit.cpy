# A BufferedRef's window is VMEM too: four buffers of (2048, 2048) f32
# blocks need 64 MiB, on top of the 96 MiB already allocated.

kernel windows_do_not_fit(x: f32[4096, 4096] @hbm) {
  scratch = alloc f32[24576, 1024] @vmem   # 96 MiB
  # expected-error@+1 {{bx needs 67108864 bytes of vmem, but only 33554432 of its 134217728 bytes are free in target default}}
  bx = buffered_ref x, block=(2048, 2048), buffers=4
  buffered_copy x -> bx[1, 1], slot=3
}
