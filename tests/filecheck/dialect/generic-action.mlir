// RUN: copyir verify --emit mlir %s | filecheck %s

// The generic form spells a DMA's action as the enum attribute or, as before
// it, as a string; both verify and print as the custom form's word.

copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>) {
  %buf = copy.alloc : !copy.ref<8x128xf32, vmem>
  %s = copy.semaphore : !copy.sem
  // CHECK: copy.dma "start" %x, %buf, %s
  "copy.dma"(%x, %buf, %s) <{action = "start"}> : (!copy.ref<8x128xf32, hbm>, !copy.ref<8x128xf32, vmem>, !copy.sem) -> ()
  // CHECK-NEXT: copy.dma "wait" %x, %buf, %s
  "copy.dma"(%x, %buf, %s) <{action = #copy<action wait>}> : (!copy.ref<8x128xf32, hbm>, !copy.ref<8x128xf32, vmem>, !copy.sem) -> ()
}
