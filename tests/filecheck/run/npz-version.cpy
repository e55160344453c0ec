# RUN: copyir lower %s -o %t.npz
# RUN: python -c "import json, sys, numpy as np; d = dict(np.load(sys.argv[1])); m = json.loads(str(d['meta'])); m['version'] = 2; d['meta'] = np.array(json.dumps(m)); np.savez(sys.argv[1], **d)" %t.npz
# RUN: not copyir run %t.npz --fill-inputs zeros 2>&1 | filecheck %s

# A binary stream of another format version (an older copyir's) is one
# clear error naming both versions, never a table misread.

# CHECK: npz:1:1: error: Cannot read DMA stream {{.*}}.npz: it is a copyir DMA stream of format version 2, and this copyir reads version 6 only: lower the program again with this copyir
kernel old(x: f32[8], y: f32[8]) {
  sync_copy x -> y
}
