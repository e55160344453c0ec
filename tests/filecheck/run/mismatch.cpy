# RUN: not copyir run --verify-diagnostics --fill-inputs zeros %s 2>&1 | filecheck %s

# A mismatch is a diagnostic at its line, `file:line:col: error:`, so that an
# editor jumps to it. Here the program runs without error, so neither the
# expected warning nor the expected error is produced.

kernel fine(x: f32[8], y: f32[8]) {
  # expected-warning@+2 {{y is only partly written}}
  # expected-error@+1 {{Race}}
  sync_copy x -> y
}
# CHECK:      mismatch.cpy:[[# @LINE - 4]]:5: error: expected warning "y is only partly written" was not produced
# CHECK-NEXT:   # expected-warning@+2 {{[{][{]}}y is only partly written{{[}][}]}}
# CHECK-NEXT:     ^
# CHECK-NEXT: mismatch.cpy:[[# @LINE - 6]]:5: error: expected error "Race" was not produced
