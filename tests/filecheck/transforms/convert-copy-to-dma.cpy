# RUN: copyir opt %s | filecheck %s
# RUN: copyir lower %s | filecheck %s --check-prefix=TEXT
# RUN: copyir lower --no-origins %s | filecheck %s --check-prefix=BARE

# The whole lowering (copyir opt's default pipeline, what copyir lower
# runs): views fold into addresses and strides in elements, waits count
# bytes, and each instruction keeps its origin.

# CHECK:      dma.program "lowered" target "default" semaphores 3 {
# CHECK-NEXT:   dma.buffer "x" "hbm" 0 f32 [1000, 384] param
# CHECK-NEXT:   dma.buffer "y" "hbm" 1536000 f32 [1000, 384] param
# CHECK-NEXT:   dma.buffer "bx" "vmem" 0 f32 [2, 128, 128]
# CHECK-NEXT:   dma.buffer "row" "vmem" 131072 f32 [384]
# CHECK-NEXT:   dma.semaphore "sems" 0 [2]
kernel lowered(x: f32[1000, 384] @hbm, y: f32[1000, 384] @hbm) {
  bx = buffered_ref x, block=(128, 128), buffers=2
  row = alloc f32[384] @vmem
  sems = semaphore[2]
  # Block (7, 2): rows 896:1000, columns 256:384; x + (896 * 384 + 256) * 4.
  # CHECK-NEXT:   dma.start "hbm" 1377280 [384, 1] -> "vmem" 0 [128, 1] f32 [104, 128] sem 2 loc("block (7, 2) slot 0"("{{.*}}convert-copy-to-dma.cpy":[[# @LINE + 5]]:3))
  # CHECK-NEXT:   dma.wait sem 2 bytes 53248
  # The cut block leaves rows 104:128 of the slot as padding: they keep
  # what the slot held.
  # CHECK-NEXT:   dma.opaque "padding of a cut block" writes "vmem" 53248 [128, 1] f32 [24, 128] keeps
  buffered_copy x -> bx[7, 2], slot=0
  # Row 5 of y, columns 8:16 from the row buffer, on semaphore 1 of the array.
  # CHECK-NEXT:   dma.start "vmem" 131104 [1] -> "hbm" 1543712 [1] f32 [8] sem 1 add priority 1
  # CHECK-NEXT:   dma.wait sem 1 bytes 32
  copy_start row[8:16] -> y[5, 8:16], sems[1], add, priority=1
  copy_wait row[8:16] -> y[5, 8:16], sems[1]
  # CHECK-NEXT: }
}

# TEXT:      // copyir DMA stream: kernel lowered, target default
# TEXT:      dma.start "hbm" 1377280 [384, 1] -> "vmem" 0 [128, 1] f32 [104, 128] sem 2  // {{.*}}convert-copy-to-dma.cpy:25:3 block (7, 2) slot 0
# TEXT-NEXT: dma.wait sem 2 bytes 53248  // {{.*}}convert-copy-to-dma.cpy:25:3 block (7, 2) slot 0
# TEXT-NEXT: dma.opaque "padding of a cut block" writes "vmem" 53248 [128, 1] f32 [24, 128] keeps  // {{.*}}convert-copy-to-dma.cpy:25:3 block (7, 2) slot 0
# TEXT-NEXT: dma.start "vmem" 131104 [1] -> "hbm" 1543712 [1] f32 [8] sem 1 add priority 1  // {{.*}}convert-copy-to-dma.cpy:29:3
# BARE:      dma.wait sem 2 bytes 53248{{$}}
