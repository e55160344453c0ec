"""Small DMA streams whose protocol answers are known by hand, shared by
the completion-model and protocol-query tests."""

from __future__ import annotations

HEADER = """dma.program "{name}" target "default" semaphores 2 {{
  dma.buffer "x" "hbm" 0 f32 [16, 128] param
  dma.buffer "y" "hbm" 8192 f32 [16, 128] param
  dma.buffer "buf" "vmem" 0 f32 [16, 128]
  dma.semaphore "s" 0 [2]
"""
X0 = '"hbm" 0 [128, 1] -> "vmem" 0 [128, 1] f32 [8, 128]'
X1 = '"hbm" 4096 [128, 1] -> "vmem" 4096 [128, 1] f32 [8, 128]'
Y0 = '"vmem" 0 [128, 1] -> "hbm" 8192 [128, 1] f32 [8, 128]'
Y1 = '"vmem" 4096 [128, 1] -> "hbm" 12288 [128, 1] f32 [8, 128]'


def program(name: str, *lines: str) -> str:
    body = "".join(f"  {line}\n" for line in lines)
    return HEADER.format(name=name) + body + "}\n"


SHARED = program(
    "shared",
    f"dma.start {X0} sem 0",  # 0: DMA 0
    f"dma.start {X1} sem 0",  # 1: DMA 1
    "dma.wait sem 0 bytes 4096",  # 2: 4096 of the 8192 bytes started on s[0]
    "dma.wait sem 0 bytes 4096",  # 3: all of them: finishes DMAs 0 and 1
    f"dma.start {Y0} sem 1",  # 4: DMA 2
    "dma.wait sem 1 bytes 4096",  # 5: finishes DMA 2
    f"dma.start {Y1} sem 1",  # 6: DMA 3
    "dma.wait sem 1 bytes 4096",  # 7: finishes DMA 3
)
"""Two fetches on one semaphore, finished only by the second wait (the
rule: a wait proves nothing about one DMA until the waits have consumed
every byte started before them), then two write-backs, one at a time."""

RACE = program(
    "race",
    f"dma.start {X0} sem 0",  # 0: DMA 0 writes buf[0:8]
    f"dma.start {Y0} sem 1",  # 1: DMA 1 reads buf[0:8] while DMA 0 is in flight
    "dma.wait sem 0 bytes 4096",  # 2
    "dma.wait sem 1 bytes 4096",  # 3
)

NEVER_WAITED = program(
    "never",
    f"dma.start {X0} sem 0",  # 0: DMA 0, finished at 2
    f"dma.start {X1} sem 1",  # 1: DMA 1, never waited
    "dma.wait sem 0 bytes 4096",  # 2
)
