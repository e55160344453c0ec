dma.program "k" target "default" semaphores 1 {
  dma.buffer "x" "hbm" 0 f32 [8] param
  dma.buffer "a" "vmem" 0 f32 [8]
  // BAD: opaque-malformed.mlir:[[# @LINE + 1]]:20: error: Expected 'reads' or 'writes'
  dma.opaque "exp" both "vmem" 0 [1] f32 [8]
}

// -----

dma.program "k" target "default" semaphores 1 {
  dma.buffer "x" "hbm" 0 f32 [8] param
  dma.buffer "a" "vmem" 0 f32 [8]
  // BAD: opaque-malformed.mlir:[[# @LINE + 1]]:3: error: Malformed DMA stream: Loads and stores are only allowed on VMEM and SMEM references.
  dma.opaque "exp" writes "hbm" 0 [1] f32 [8]
}
