// RUN: copyir lower --no-origins %s | filecheck %s
// RUN: copyir lower %s | copyir run - --fill-inputs iota --mode on_wait | filecheck %s --check-prefix=RAN

// Loops stay loops in the stream: a copy.for is a dma.loop, addresses and
// semaphore ids that depend on the index are affine maps of it (d0), a
// copy.when is the predicate of each instruction inside it, a descriptor's
// start and wait are DMAs of its values, and a computation is a
// dma.compute. The stream does not grow with the trip count.

// CHECK:      dma.program "stream" target "default" semaphores 4 {
// CHECK:        dma.semaphore "sems" 0 [2]
// CHECK-NEXT:   dma.semaphore "out" 2 [2]
// The prologue fetches block 0 into slot 0.
// CHECK-NEXT:   dma.start "hbm" 0 [128, 1] -> "vmem" 0 [128, 1] f32 [8, 128] sem 0
// CHECK-NEXT:   dma.loop "i" 16 {
// Block i + 1 into slot (i + 1) mod 2 while i <= 14.
// CHECK-NEXT:     dma.start "hbm" {(d0) -> (((d0 * 4096) + 4096))} [128, 1] -> "vmem" {(d0) -> ((((d0 + 1) mod 2) * 4096))} [128, 1] f32 [8, 128] sem {(d0) -> (((d0 + 1) mod 2))} if {(d0) : (((d0 * -1) + 14) >= 0)}
// CHECK-NEXT:     dma.wait sem {(d0) -> ((d0 mod 2))} bytes 4096
// CHECK-NEXT:     dma.compute "vmem" 8192 [128, 1] f32 [8, 128] = "(add (mul 2.0 $0) 1.0)" ("vmem" {(d0) -> (((d0 mod 2) * 4096))} [128, 1])
// CHECK-NEXT:     dma.start "vmem" 8192 [128, 1] -> "hbm" {(d0) -> (((d0 * 4096) + 65536))} [128, 1] f32 [8, 128] sem {(d0) -> (((d0 mod 2) + 2))}
// CHECK-NEXT:     dma.wait sem {(d0) -> (((d0 mod 2) + 2))} bytes 4096
// CHECK-NEXT:   }
// CHECK-NEXT: }

// RAN: ran stream: 32 DMAs, on_wait mode; final values:
copy.kernel @stream(%x: !copy.ref<128x128xf32, hbm>, %y: !copy.ref<128x128xf32, hbm>) {
  %buf = copy.alloc : !copy.ref<2x8x128xf32, vmem>
  %res = copy.alloc : !copy.ref<8x128xf32, vmem>
  %sems = copy.semaphore : !copy.sem_array<2>
  %out = copy.semaphore : !copy.sem_array<2>
  %first = copy.view %x[0:8, 0:128] : !copy.ref<128x128xf32, hbm>
  %slot0 = copy.view %buf[0] : !copy.ref<2x8x128xf32, vmem>
  %s0 = copy.sem_index %sems[0] : !copy.sem_array<2> -> !copy.sem
  copy.dma "start" %first, %slot0, %s0 : !copy.ref<8x128xf32, hbm>, !copy.ref<8x128xf32, vmem>, !copy.sem
  copy.for %i in range(0, 16) {
    %slot = copy.index affine_map<(d0) -> (d0 mod 2)>(%i)
    %next = copy.index affine_map<(d0) -> ((d0 + 1) mod 2)>(%i)
    %row = copy.index affine_map<(d0) -> (d0 * 8)>(%i)
    %nrow = copy.index affine_map<(d0) -> ((d0 + 1) * 8)>(%i)
    copy.when [affine_set<(d0) : (14 - d0 >= 0)>](%i) {
      %src = copy.view %x[ds(%nrow, 8), 0:128] : !copy.ref<128x128xf32, hbm>
      %dst = copy.view %buf[%next] : !copy.ref<2x8x128xf32, vmem>
      %s = copy.sem_index %sems[%next] : !copy.sem_array<2> -> !copy.sem
      copy.dma "start" %src, %dst, %s : !copy.ref<8x128xf32, hbm>, !copy.ref<8x128xf32, vmem>, !copy.sem
    }
    %v = copy.view %x[ds(%row, 8), 0:128] : !copy.ref<128x128xf32, hbm>
    %w = copy.view %buf[%slot] : !copy.ref<2x8x128xf32, vmem>
    %s = copy.sem_index %sems[%slot] : !copy.sem_array<2> -> !copy.sem
    %c = copy.async_copy %v, %w, %s : !copy.ref<8x128xf32, hbm>, !copy.ref<8x128xf32, vmem>, !copy.sem
    copy.async_dma "wait" %c
    copy.compute %res (%w) : !copy.ref<8x128xf32, vmem>, !copy.ref<8x128xf32, vmem> {
    ^bb0(%a0: f32):
      %e0 = scalar.constant "2.0" : f32
      %e1 = scalar.mul %e0, %a0 : f32
      %e2 = scalar.constant "1.0" : f32
      %e3 = scalar.add %e1, %e2 : f32
      scalar.yield %e3 : f32
    }
    %yv = copy.view %y[ds(%row, 8), 0:128] : !copy.ref<128x128xf32, hbm>
    %o = copy.sem_index %out[%slot] : !copy.sem_array<2> -> !copy.sem
    %back = copy.async_copy %res, %yv, %o : !copy.ref<8x128xf32, vmem>, !copy.ref<8x128xf32, hbm>, !copy.sem
    copy.async_dma "start" %back
    copy.async_dma "wait" %back
  }
}
