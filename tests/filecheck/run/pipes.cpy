# RUN: copyir lower %s | copyir run - --fill-inputs zeros | filecheck %s
# RUN: copyir opt < %s | copyir run - --fill-inputs iota | filecheck %s
# RUN: copyir opt %s | copyir verify -
# RUN: copyir lower %s | copyir verify --input-format dma -
# RUN: copyir lower %s --format npz -o - | copyir run - --fill-inputs iota | filecheck %s
# RUN: copyir lower %s -o %t.npz && copyir lower %t.npz | filecheck %s --check-prefix=TEXT
# RUN: copyir opt --target small -p expand-windows,assign-addresses --emit cpy %s | filecheck %s --check-prefix=SMALL

# The mlir-opt habits: a file or stdin, and every lowered form (the .dma
# text, the MLIR that `opt` prints, the binary .npz) feeds `run`, `verify`
# and `lower` again, its form told by its content.

# CHECK:      ran pipe: 1 DMAs, random mode; final values:
# CHECK-NEXT:   x: float32[8, 128]
# CHECK-NEXT:   y: float32[8, 128]
# TEXT:       dma.program "pipe" target "default" semaphores 1 {
# SMALL:      # target small: x at hbm+0, y at hbm+4096
kernel pipe(x: f32[8, 128], y: f32[8, 128]) {
  sync_copy x -> y
}
