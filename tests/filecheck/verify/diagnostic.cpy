# RUN: not copyir verify %s 2>&1 | filecheck %s
# RUN: not copyir verify - < %s 2>&1 | filecheck %s --check-prefix=STDIN
# RUN: copyir --version | filecheck %s --check-prefix=VERSION

# A diagnostic is `file:line:col: error: message`, then the source line and
# a caret under the statement; a note follows with the pytree leaf.

# CHECK:      diagnostic.cpy:[[# @LINE + 8]]:3: error: DMA source and target shape mismatch.
# CHECK-NEXT:   sync_copy {w: a, b: [a, b]} -> {w: va, b: [va, vb]}
# CHECK-NEXT:   ^
# CHECK-NEXT: note: at leaf ['b'][1]: b is f32[4, 8] @hbm, vb is f32[8, 4] @vmem
# CHECK-NOT:  Traceback
# STDIN:      <stdin>:[[# @LINE + 3]]:3: error: DMA source and target shape mismatch.
kernel k(a: f32[8, 4], b: f32[4, 8]) {
  va = alloc f32[8, 4] @vmem; vb = alloc f32[8, 4] @vmem
  sync_copy {w: a, b: [a, b]} -> {w: va, b: [va, vb]}
}

# VERSION: copyir 0.1.0
