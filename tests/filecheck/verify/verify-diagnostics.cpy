# RUN: copyir verify --split-input-file --verify-diagnostics %s
# RUN: copyir opt --split-input-file --verify-diagnostics %s
# RUN: copyir lower --split-input-file --verify-diagnostics %s
# RUN: copyir run --split-input-file --verify-diagnostics --fill-inputs zeros %s
# RUN: not copyir lower --split-input-file %s 2>&1 | filecheck %s

# Every command checks its diagnostics against the comments, part by part;
# `@below` and `@above` name the nearest line that is not an expectation.

kernel ok(x: f32[8], y: f32[8]) {
  sync_copy x -> y
}

# -----

kernel bad(x: f32[8]) {
  # expected-error@below {{alloc b must be in vmem or smem, got f32[8] @hbm}}
  b = alloc f32[8] @hbm
}
# CHECK: verify-diagnostics.cpy:[[# @LINE - 2]]:3: error: alloc b must be in vmem or smem, got f32[8] @hbm

# -----

kernel bad_too(x: f32[8]) {
  c = alloc f32[8] @smem
  d = alloc f32[8] @hbm
  # expected-error@above {{alloc d must be in vmem or smem}}
}
# CHECK: verify-diagnostics.cpy:[[# @LINE - 3]]:3: error: alloc d must be in vmem or smem, got f32[8] @hbm
