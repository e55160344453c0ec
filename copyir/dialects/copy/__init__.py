"""The copy dialect: refs, semaphores, BufferedRefs and the DMAs between them.

One module per concern: `types` (types and attributes), `base` (the
`CopyOp` base, how messages name values, shared checks), `indexing` (mixed
static/dynamic index lists), `refs` (kernels, allocations, semaphores,
scopes, views), `dmas` (DMAs and descriptors), `windows` (BufferedRefs and their
windows), `control` (for, index, when), `compute` and `pipeline`;
`generic` makes xDSL's generic checks and accessors cheap. The dialect is
assembled here (its ops given `generic`'s accessors), and every public
name is re-exported, so `from copyir.dialects.copy import X` finds it.

The ops follow the TPU copy helpers of JAX Pallas. Every op has a builder
(`__init__`) that a user calls from Python and that checks eagerly; the
parsers build ops leniently (`Op.create`) so that every semantic error
comes from the verifier.
"""

from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation

from .base import (
    ACTIONS,
    CopyOp,
    DmaAction,
    DmaActionAttr,
    action_attr,
    check_action,
    describe,
    expect_ref,
    expect_semaphore,
    set_name,
)
from .compute import ComputeOp, body_of, element_type
from .control import (
    ARBITRARY,
    PARALLEL,
    SEMANTICS,
    Combine,
    CombineAttr,
    DimensionSemantics,
    DimensionSemanticsAttr,
    ForOp,
    IndexOp,
    WhenOp,
    parallel_semantics,
    semantics_attr,
)
from .dmas import AsyncCopyOp, AsyncDmaOp, DmaOp, SyncCopyOp, _print_tree_side
from .generic import fast_accessors, types_as_written
from .indexing import all_given, check_subscript
from .opaque import OpaqueOp
from .pipeline import (
    IN,
    INOUT,
    OUT,
    Direction,
    DirectionAttr,
    PipelineOp,
    PipelineSpecAttr,
    default_index_name,
    is_viewed,
)
from .refs import (
    ALLOCATING,
    AllocOp,
    InvalidateOp,
    KernelOp,
    ScopeOp,
    SemaphoreOp,
    SemIndexOp,
    ViewOp,
    kernel_level,
    sem_index_result_type,
    view_result_type,
)
from .types import (
    BLOCK_KINDS,
    BLOCKED,
    BOUNDED,
    DESCRIPTOR,
    DYNAMIC,
    ELEMENT,
    SEMAPHORE,
    SQUEEZED,
    BlockDimAttr,
    BlockKind,
    BlockKindAttr,
    BufferedRefType,
    DescriptorType,
    MemorySpace,
    MemorySpaceAttr,
    RefType,
    SemaphoreArrayType,
    SemaphoreType,
    Subscript,
    describe_type,
    ref_type,
)
from .windows import (
    BufferedCopyOp,
    BufferedRefOp,
    WindowOp,
    check_block_indices,
    is_padded,
    past_end,
    past_end_error,
    rounded,
    tiles,
    viewed_past_end,
    viewed_past_end_error,
)

_check_subscript = check_subscript  # the name passes.verify imports

Copy = Dialect(
    "copy",
    [
        KernelOp,
        AllocOp,
        SemaphoreOp,
        ViewOp,
        SemIndexOp,
        DmaOp,
        SyncCopyOp,
        BufferedRefOp,
        BufferedCopyOp,
        ForOp,
        IndexOp,
        WhenOp,
        AsyncCopyOp,
        AsyncDmaOp,
        ComputeOp,
        OpaqueOp,
        InvalidateOp,
        PipelineOp,
        WindowOp,
        ScopeOp,
    ],
    [
        MemorySpaceAttr,
        BlockKindAttr,
        RefType,
        SemaphoreType,
        SemaphoreArrayType,
        BlockDimAttr,
        BufferedRefType,
        DescriptorType,
        DirectionAttr,
        PipelineSpecAttr,
        DmaActionAttr,
        DimensionSemanticsAttr,
        CombineAttr,
    ],
)
for _op in Copy.operations:
    assert issubclass(_op, IRDLOperation)  # every copy op is declared
    fast_accessors(_op)
    types_as_written(_op)

__all__ = [
    "ACTIONS",
    "ALLOCATING",
    "ARBITRARY",
    "BLOCKED",
    "BLOCK_KINDS",
    "BOUNDED",
    "DESCRIPTOR",
    "DYNAMIC",
    "ELEMENT",
    "IN",
    "INOUT",
    "OUT",
    "PARALLEL",
    "SEMANTICS",
    "SEMAPHORE",
    "SQUEEZED",
    "AllocOp",
    "AsyncCopyOp",
    "AsyncDmaOp",
    "BlockDimAttr",
    "BlockKind",
    "BlockKindAttr",
    "BufferedCopyOp",
    "BufferedRefOp",
    "BufferedRefType",
    "Combine",
    "CombineAttr",
    "ComputeOp",
    "Copy",
    "CopyOp",
    "DescriptorType",
    "DimensionSemantics",
    "DimensionSemanticsAttr",
    "Direction",
    "DirectionAttr",
    "DmaAction",
    "DmaActionAttr",
    "DmaOp",
    "ForOp",
    "IndexOp",
    "InvalidateOp",
    "KernelOp",
    "MemorySpace",
    "MemorySpaceAttr",
    "OpaqueOp",
    "PipelineOp",
    "PipelineSpecAttr",
    "RefType",
    "ScopeOp",
    "SemIndexOp",
    "SemaphoreArrayType",
    "SemaphoreOp",
    "SemaphoreType",
    "Subscript",
    "SyncCopyOp",
    "ViewOp",
    "WhenOp",
    "WindowOp",
    "_check_subscript",
    "_print_tree_side",
    "action_attr",
    "all_given",
    "body_of",
    "check_action",
    "check_block_indices",
    "default_index_name",
    "describe",
    "describe_type",
    "element_type",
    "expect_ref",
    "expect_semaphore",
    "is_padded",
    "is_viewed",
    "kernel_level",
    "parallel_semantics",
    "past_end",
    "past_end_error",
    "ref_type",
    "rounded",
    "sem_index_result_type",
    "semantics_attr",
    "set_name",
    "tiles",
    "view_result_type",
    "viewed_past_end",
    "viewed_past_end_error",
]
