# Memory spaces are hbm (or its alias any), vmem and smem.

kernel unknown_space(x: f32[8, 128] @hbm) {
  # expected-error@+1 {{Unknown memory space: vram (expected hbm, any, vmem or smem)}}
  buf = alloc f32[8, 128] @vram
}
