// RUN: not copyir run %s 2>&1 | filecheck %s

// A stream written by hand that declares a buffer twice is the user's
// mistake: `Malformed DMA stream` at the second declaration, exit 1 (a
// stream copyir's own lowering made is never reported so: that would be
// an internal error, exit 3).

dma.program "k" target "default" semaphores 1 {
  dma.buffer "x" "hbm" 0 f32 [8] param
  // CHECK: malformed-stream.mlir:[[# @LINE + 2]]:3: error: Malformed DMA stream: buffer t is declared twice
  dma.buffer "t" "vmem" 0 f32 [8]
  dma.buffer "t" "vmem" 64 f32 [8]
  dma.start "hbm" 0 [1] -> "vmem" 0 [1] f32 [8] sem 0
  dma.wait sem 0 bytes 32
}
