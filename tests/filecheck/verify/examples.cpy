# RUN: copyir verify --verify-diagnostics %S/../../../examples/invalid/*.cpy %S/../../../examples/invalid/*.mlir
# RUN: copyir verify %S/../../../examples/*.cpy

# Every documented error has a small program in examples/invalid/ that
# states, in an `expected-error` comment, the exact message it produces and
# the line it points at (mlir-opt's invalid.mlir style, one file each so
# that users can run them). Every program in examples/ verifies.

# A file that fails its own expectations fails the check:
# RUN: not copyir verify --verify-diagnostics %s 2>&1 | filecheck %s
# CHECK: line [[# @LINE + 4]]: expected error {{[{][{]}}Unknown action: start{{[}][}]}} was not produced
# CHECK: line [[# @LINE + 3]]: unexpected error: Unknown action: Start
kernel k(x: f32[8] @hbm) {
  # expected-error@+1 {{Unknown action: start}}
  dma Start x -> x, x
}
