# RUN: copyir verify --emit cpy %s | filecheck %s
# RUN: copyir verify --emit mlir %s | copyir verify --input-format mlir --emit cpy - | filecheck %s
# RUN: copyir verify --emit cpy --debuginfo %s | copyir verify --emit cpy - | filecheck %s
# RUN: copyir verify --emit mlir %s | filecheck %s --check-prefix=MLIR

# A scope (Pallas' pl.run_scoped) prints back as written, nested in loops,
# conditions and other scopes, and survives a trip through the MLIR form.

# CHECK:      kernel scopes(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
kernel scopes(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  # CHECK-NEXT:   scope {
  # CHECK-NEXT:   }
  scope {
  }
  # CHECK-NEXT:   for i in range(8) {
  for i in range(8) {
    # CHECK-NEXT:     scope {
    scope {
      # CHECK-NEXT:       sem = semaphore
      sem = semaphore
      # CHECK-NEXT:       when i <= 6 {
      when i <= 6 {
        # CHECK-NEXT:         scope {
        scope {
          # CHECK-NEXT:           buf = alloc f32[8, 128] @vmem
          buf = alloc f32[8, 128] @vmem
          # CHECK-NEXT:           sems = semaphore[2]
          sems = semaphore[2]
          # CHECK-NEXT:           copy_start x[ds(8 * i, 8)] -> buf, sems[0]
          copy_start x[ds(8 * i, 8)] -> buf, sems[0]
          # CHECK-NEXT:           copy_wait x[ds(8 * i, 8)] -> buf, sems[0]
          copy_wait x[ds(8 * i, 8)] -> buf, sems[0]
          # CHECK-NEXT:           copy_start buf -> y[ds(8 * i, 8)], sem
          copy_start buf -> y[ds(8 * i, 8)], sem
          # CHECK-NEXT:           copy_wait buf -> y[ds(8 * i, 8)], sem
          copy_wait buf -> y[ds(8 * i, 8)], sem
        # CHECK-NEXT:         }
        }
      # CHECK-NEXT:       }
      }
    # CHECK-NEXT:     }
    }
  # CHECK-NEXT:   }
  }
# CHECK-NEXT: }
}

# MLIR:      copy.kernel @scopes
# MLIR-NEXT:   copy.scope {
# MLIR-NEXT:   } loc(
# MLIR-NEXT:   copy.for %i in range(0, 8) {
# MLIR-NEXT:     copy.scope {
# MLIR-NEXT:       %sem = copy.semaphore : !copy.sem loc(
# MLIR-NEXT:       copy.when
# MLIR-NEXT:         copy.scope {
# MLIR-NEXT:           %buf = copy.alloc : !copy.ref<8x128xf32, vmem> loc(
