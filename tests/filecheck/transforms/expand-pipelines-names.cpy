# RUN: copyir verify %s
# RUN: copyir lower %s | filecheck %s
# RUN: copyir opt -p expand-pipelines --emit cpy %s | copyir lower --input-format cpy - | filecheck %s
# RUN: copyir opt -p expand-pipelines --emit mlir %s | copyir lower --input-format mlir - | filecheck %s
# RUN: copyir run --fill-inputs iota %s | filecheck %s --check-prefix=RAN

# The names a pipeline's expansion makes are fresh in the kernel: two
# pipelines over one input, `in x` with `out x`, and a scratch the user
# named `x_window` each get their own window and semaphores, under the
# first free suffix, and keep them through the printed expansion.

kernel names(x: f32[256, 128] @hbm, y: f32[256, 128] @hbm) {
  x_window = alloc f32[128, 128] @vmem
  pipeline grid=(2,)
      in  x block=(128, 128) index=(i) -> (i, 0)
      out y block=(128, 128) index=(i) -> (i, 0)
      (xw, yw) {
    x_window[...] = xw + 1.0
    yw[...] = x_window
  }
  pipeline grid=(2,)
      in  x block=(128, 128) index=(i) -> (i, 0)
      out x block=(128, 128) index=(i) -> (i, 0)
      (xi, xo) {
    xo[...] = 2.0 * xi
  }
}

# CHECK:      dma.buffer "x" "hbm"
# CHECK-NEXT: dma.buffer "y" "hbm"
# CHECK-NEXT: dma.buffer "x_window" "vmem" {{[0-9]+}} f32 [128, 128]
# CHECK-NEXT: dma.buffer "x_window_1" "vmem" {{[0-9]+}} f32 [2, 128, 128]
# CHECK-NEXT: dma.buffer "y_window" "vmem"
# CHECK-NEXT: dma.buffer "x_window_2" "vmem"
# CHECK-NEXT: dma.buffer "x_window_3" "vmem"
# CHECK-NEXT: dma.semaphore "x_sems" {{[0-9]+}} [2]
# CHECK-NEXT: dma.semaphore "y_sems" {{[0-9]+}} [2]
# CHECK-NEXT: dma.semaphore "x_sems_1" {{[0-9]+}} [2]
# CHECK-NEXT: dma.semaphore "x_sems_2" {{[0-9]+}} [2]

# RAN: ran names: {{[0-9]+}} DMAs
