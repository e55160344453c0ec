// RUN: copyir run --fill-inputs iota %s 2>&1 | filecheck %s
// RUN: not copyir run --split-input-file --fill-inputs iota %S/Inputs/opaque-malformed.mlir 2>&1 | filecheck %S/Inputs/opaque-malformed.mlir --check-prefix=BAD

// A hand-written stream with opaque computations: each box it reads, then
// each box it writes with poison. The warning is at the instruction's
// line when the stream carries no origins.

dma.program "k" target "default" semaphores 1 {
  dma.buffer "x" "hbm" 0 f32 [8] param
  dma.buffer "y" "hbm" 32 f32 [8] param
  dma.buffer "a" "vmem" 0 f32 [8]
  dma.start "hbm" 0 [1] -> "vmem" 0 [1] f32 [8] sem 0
  dma.wait sem 0 bytes 32
  dma.opaque "cumsum" reads "vmem" 0 [1] f32 [8]
  // CHECK: warning: Output y holds poison that opaque computation "cumsum" wrote: 4 of its 8 elements, the first at y[4]
  dma.opaque "cumsum" writes "vmem" 16 [1] f32 [4]
  dma.start "vmem" 0 [1] -> "hbm" 32 [1] f32 [8] sem 0
  dma.wait sem 0 bytes 32
}
// CHECK: ran k: 2 DMAs
