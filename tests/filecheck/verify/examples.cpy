# RUN: copyir verify --verify-diagnostics %S/../../../examples/invalid/*.cpy %S/../../../examples/invalid/*.mlir
# RUN: copyir verify %S/../../../examples/*.cpy

# Every documented error has a small program in examples/invalid/ that
# states, in an `expected-error` comment, the exact message it produces and
# the line it points at (mlir-opt's invalid.mlir style, one file each so
# that users can run them). Every program in examples/ verifies.

# An example's notes are checked here, so that no lit case repeats it:
# RUN: not copyir verify %S/../../../examples/invalid/loop_index_out_of_scope.cpy 2>&1 | filecheck %s --check-prefix=SCOPE
# SCOPE: note: i is the index of the loop at line 6 and exists only inside that loop

# A file that fails its own expectations fails the check:
# RUN: not copyir verify --verify-diagnostics %s 2>&1 | filecheck %s
# Each mismatch is a diagnostic at its line, so that editors can jump to it:
# the expectation that was not produced, then the error no one expected.
# CHECK:      examples.cpy:[[# @LINE + 7]]:5: error: expected error "Unknown action: start" was not produced
# CHECK-NEXT:   # expected-error@+1 {{[{][{]}}Unknown action: start{{[}][}]}}
# CHECK-NEXT:     ^
# CHECK-NEXT: examples.cpy:[[# @LINE + 5]]:3: error: unexpected error: Unknown action: Start
# CHECK-NEXT:   dma Start x -> x, x
# CHECK-NEXT:   ^
kernel k(x: f32[8] @hbm) {
  # expected-error@+1 {{Unknown action: start}}
  dma Start x -> x, x
}
