"""Fresh names for what a lowering makes in a kernel.

A stream identifies its buffers by name, and the authoring syntax and the
MLIR form print a kernel's values by name, so every name a pass makes (a
pipeline's window buffers and semaphores, a buffer the IR left unnamed)
must differ from the user's names and from every other made name in the
kernel: `x_window`, then `x_window_1`, `x_window_2`, ... Names are kept
whole with `set_name` (xDSL's setter would drop the `_1` and make them
collide again).
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.ir import Operation, SSAValue

from copyir.dialects.copy import set_name


class FreshNames:
    """The names taken in one kernel, and fresh ones on demand."""

    def __init__(self, taken: Iterable[str] = ()):
        self.taken = set(taken)
        self.suffix: dict[str, int] = {}
        """Per base, the last suffix tried: asking for the same base again
        does not retry the suffixes taken before (no quadratic search)."""

    @staticmethod
    def of(kernel: Operation) -> FreshNames:
        """Every name a value of the kernel has: parameters, results and
        block arguments at any depth (a made name at the top level is
        visible in every body, so it must not shadow a body's names)."""
        taken = set()
        for op in kernel.walk():
            for value in _values(op):
                if value.name_hint:
                    taken.add(value.name_hint)
        return FreshNames(taken)

    def __call__(self, base: str) -> str:
        """`base` if no value has it, else `base_N` for the least free N."""
        name, n = base, self.suffix.get(base, 0)
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.suffix[base] = n
        self.taken.add(name)
        return name

    def name(self, value: SSAValue, base: str) -> None:
        """Give a made value a fresh name from `base`."""
        set_name(value, self(base))


def _values(op: Operation) -> Iterable[SSAValue]:
    yield from op.results
    for region in op.regions:
        for block in region.blocks:
            yield from block.args
