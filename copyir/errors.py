"""The project's error type and every message a user can meet, in one place.

All errors a user can cause (syntax, verification, lowering, run time) are a
`CopyIRError`: a `ValueError` whose `str()` is exactly the message. The
location and any related sites travel beside the message, so the API can let
the exception through unchanged while the command line prints
`file:line:col: error: message` with the source line and a caret.

Messages from Pallas and Mosaic are kept verbatim (stray full stop included)
and name nothing; the others name the values involved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from numbers import Integral


@dataclass(frozen=True)
class Loc:
    """A point in a source file (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Note:
    """A second site of a diagnostic, such as the other end of a race."""

    message: str
    loc: Loc | None = None


class Located(Exception):
    """A message at a location, with notes: what an error and a warning
    share. `str()` is exactly the message."""

    def __init__(
        self, message: str, loc: Loc | None = None, notes: tuple[Note, ...] = ()
    ):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.notes = tuple(notes)

    def __str__(self) -> str:
        return self.message


class CopyIRError(Located, ValueError):
    """A user-facing error: `str(err)` is exactly the message."""

    def at(self, loc: Loc | None) -> CopyIRError:
        """Give the error a location if it has none yet; returns self."""
        if self.loc is None:
            self.loc = loc
        return self


class InvocationError(CopyIRError):
    """The command line, or a file it names, is wrong rather than the program:
    an input name that matches no parameter, a kernel the file lacks, an
    input of the wrong shape. The command line exits 2 for it; the API
    raises it like any other `CopyIRError`."""


class InternalError(Exception):
    """A bug in copyir that its own checks caught, such as a stream its
    lowering made that the validator refuses: never the user's mistake, so
    not a `CopyIRError` (the command line exits 3 and asks for a report)."""


def format_tuple(items: Iterable) -> str:
    """`(8, 3)`, `(4,)`: values as Python writes a tuple, in messages and in
    printed programs (numpy integers as plain ones)."""
    texts = [str(int(i)) if isinstance(i, Integral) else str(i) for i in items]
    return f"({', '.join(texts)}{',' * (len(texts) == 1)})"


class CopyIRWarning(Located, UserWarning):
    """A located diagnostic that does not stop the command.

    Raised through Python's `warnings` module (`warnings.warn(CopyIRWarning(
    message, loc))`), so the API's callers can filter or record it; the
    command line prints it as `file:line:col: warning: message`, and
    `--verify-diagnostics` matches it against `expected-warning` comments.
    """


# Verbatim from Pallas (jax/_src/pallas/mosaic/helpers.py, pipeline.py).
UNKNOWN_ACTION = "Unknown action: {action}"
NEITHER_BUFFERED = "One of src or dst must be a BufferedRef."
BOTH_BUFFERED = "Only one of src or dst can be a BufferedRef."

# Verbatim from the Mosaic TPU dialect's DMA verifier.
SHAPE_MISMATCH = "DMA source and target shape mismatch."
DTYPE_MISMATCH = "DMA source and target element type mismatch"

# Types and declarations.
UNKNOWN_DTYPE = "Unknown dtype: {dtype} (expected one of {known})"
UNKNOWN_SPACE = "Unknown memory space: {space} (expected hbm, any, vmem or smem)"
BAD_DIMENSION = "Every dimension of a ref must be >= 1, got {type}"
PARAM_NOT_HBM = "Kernel parameter {name} must be in hbm, got {type}"
ALLOC_IN_HBM = "alloc {name} must be in vmem or smem, got {type}"
OVER_CAPACITY = (
    "{name} needs {size} bytes of {space}, more than its capacity of "
    "{capacity} bytes in target {target}"
)
RANK_TOO_LARGE = "Refs have at most {limit} dimensions, got {rank}"
TOO_MANY_SEMAPHORES = (
    "Semaphore array {name} has {count} semaphores, more than the {limit} allowed"
)
DUPLICATE_KERNEL = "Kernel {name} is defined twice"
BAD_SEMAPHORE_SHAPE = "Every dimension of a semaphore array must be >= 1, got {shape}"

# Names and order.
UNDEFINED = "{name} is not defined"
DEFINED_TWICE = "{name} is defined twice (first at line {line})"
USED_BEFORE_DEFINED = "{name} is used before its definition"
NO_KERNEL = "No kernel named {name}; the file has: {names}"
SEVERAL_KERNELS = "The file has several kernels ({names}); choose one with --kernel"
NO_KERNELS = "The file has no kernel"
MODULE_ARGUMENTS = "The top-level module takes no block arguments"
NOT_A_KERNEL = "Only kernels may appear at the top level, got {op}"
MODULE_BLOCKS = "The top-level module holds one block, got {count}"

# Operand kinds.
EXPECTED_REF = "{op} expects a ref as {role}, but {name} is {type}"
EXPECTED_BUFFERED_REF = "{op} expects a BufferedRef as {role}, but {name} is {type}"
EXPECTED_SEMAPHORE = "{op} expects a semaphore as {role}, but {name} is {type}"
UNINDEXED_SEMAPHORE_ARRAY = (
    "{op} expects a semaphore as {role}, but {name} is an array {type}; index it"
)

# Views.
TOO_MANY_INDICES = "{name} has rank {rank} but is indexed with {count} indices"
NEGATIVE_INDEX = "Negative index {index} in {expr} is not supported"
SLICE_STEP = "Slice steps are not supported: {expr}"
EMPTY_SLICE = "Empty slice {start}:{stop} in dimension {dim} of {expr}"
SLICE_OUT_OF_BOUNDS = (
    "Slice {start}:{stop} is out of bounds for dimension {dim} of {name} (size {size})"
)
INDEX_OUT_OF_BOUNDS = (
    "Index {index} is out of bounds for dimension {dim} of {name} (size {size})"
)
MALFORMED_VIEW = "Malformed view of {name}: {why}"

# DMAs.
BAD_PRIORITY = "DMA priority must be 0 or 1, got {priority}"
WAIT_OPTIONS = "{option} applies to a DMA start, not to a wait"
DMA_OVERLAP = "DMA source {src} and destination {dst} overlap"

# Pytrees.
TREE_MISMATCH = "sync_copy trees differ in structure: {src} vs {dst}"
MALFORMED_TREE = "Malformed pytree spec {spec!r}: {why}"
TREE_LEAF_COUNT = "Pytree {spec} has {leaves} leaves but {count} operands"
DUPLICATE_KEY = "Key {key} appears twice in a record"

# BufferedRefs.
BLOCK_RANK = "Block shape {block} has rank {block_rank} but the array has rank {rank}"
BLOCK_SIZE = (
    "Block size {size} in dimension {dim} must be between 1 and the array's "
    "extent {extent}"
)
BAD_BUFFERS = "buffers must be >= 1, got {buffers}"
WINDOW_SPACE = "A BufferedRef window must be in vmem or smem, got {space}"
BLOCK_INDEX_COUNT = "{bref} takes {rank} block indices, got {count}"
MISSING_BLOCK_INDICES = "buffered_copy needs block indices on {bref}"
INDICES_ON_PLAIN_REF = "Block indices belong on the BufferedRef {bref}, not on {name}"
BLOCK_INDEX_OUT_OF_BOUNDS = (
    "Block index {index} is out of bounds in dimension {dim}: the grid of {bref} "
    "has {extent} blocks there"
)
ELEMENT_INDEX_OUT_OF_BOUNDS = (
    "Element offset {index} is out of bounds in dimension {dim} of {bref} "
    "(size {extent})"
)
# Verbatim from Pallas (pipeline.py, `_create_blocked_slice`):
BLOCK_TILING = "Block size must divide tiling: block_size={block}, tiling={tiling}"
# copyir's own:
NO_TILING = (
    "Pallas has no TPU tiling for {itemsize}-byte elements, and a BufferedRef "
    "rounds its DMAs to the tiling (a cut block, Element or BoundedSlice): use "
    "elements of at most 4 bytes"
)
NO_TILING_HANGS = (
    "Pallas' BufferedRef infers the TPU tiling of an array of 2 or more "
    "dimensions for every block it copies, and for {itemsize}-byte elements "
    "its loop never ends (the kernel hangs): use elements of at most 4 bytes, "
    "or a block of the whole array"
)
CUT_BLOCK_PAST_END = (
    "The block of {bref} at {start}:{end} in dimension {dim} ends inside a TPU "
    "tile ({tile} there): Pallas rounds its DMA up to {start}:{stop}, past the "
    "array's {extent} elements (interpret mode's out-of-bounds error)"
)
VIEWED_BLOCK_PAST_END = (
    "The block of {bref} at {start}:{stop} in dimension {dim} reaches past the "
    "array's {extent} elements: a pipeline views an operand in {space} (no "
    "copy) a whole block at a time, as Pallas does (interpret mode's "
    "out-of-bounds error)"
)
SLOT_OUT_OF_RANGE = "Slot {slot} is out of range for {bref} with {buffers} buffers"
SYNC_WINDOW_SEMAPHORE = (
    "A synchronous buffered_copy takes no semaphore: start and wait it to give one"
)
WINDOWED_ARRAY_MISMATCH = "buffered_copy: {name} is {type}, but {bref} windows {array}"

# Loops, index values, conditions and computations.
# Verbatim from Pallas:
GRID_NOT_POSITIVE = (
    "All elements in the grid must be strictly positive, but got grid={grid}"
)
EMPTY_LOOP = (
    "Loop {name} over range({lower}, {upper}) runs {count} times: a loop runs "
    "at least once"
)
MALFORMED_LOOP = "Malformed loop: {why}"
# Pipelines. Verbatim from Pallas:
OUTPUT_BUFFERS = "Buffer count >2 not supported for output buffered refs."
PARALLEL_PREFIX = "Dimensions with parallel semantics must form a prefix of the grid."
REVISITED = (
    "Revisited block {block} of output {output} in iteration {iteration}. The "
    "block was previously visited in iterations {first} through {last} ."
)
OUTPUT_LOOKAHEAD = "Output buffering does not support lookahead."
BOUNDED_NEEDS_DS = "Must return a ds from the index_map for a BoundedSlice dimension."
GRID_LOOKAHEAD = "Grid must be specified when using lookahead."
NO_PARALLEL_DIMENSION = (
    "Cannot partition over cores without parallel grid dimensions:"
    " dimension_semantics={semantics}"
)
REVISIT_MODE = (
    "emit_pipeline does not implement RevisitMode. A block may be"
    " revisited once the previous write back has landed: it is awaited"
    " out_buffer_count - 1 steps after the visit that wrote it, and an"
    " input_output block is re-fetched in_buffer_count - 1 steps before"
    " the revisit, so visits must be in_buffer_count +"
    " out_buffer_count - 1 grid steps apart."
)  # JAX 0.12, pipeline.py, _make_pipeline_allocations
# copyir's own:
MALFORMED_PIPELINE = "Malformed pipeline: {why}"
CORES_ON_KERNEL_GRID = (
    "cores= partitions an emit_pipeline over cores; a kernel grid's parallel "
    "dimensions are split across cores by the chip (drop kernel_grid or cores=)"
)
CORES_NOT_POSITIVE = "cores= must be at least 1, got {cores}"
LOOKAHEAD_ONE_BUFFER = "Lookahead with 1 buffer is not supported yet"
BOUNDED_SIZE = (
    "The slice of BoundedSlice({bound}) in dimension {dim} has {size} elements: "
    "a bounded slice has 1 to {bound}"
)
INOUT_BUFFERS = "An inout operand takes buffers [in, out]: two counts"
INOUT_ON_KERNEL_GRID = (
    "inout operands are emit_pipeline's (JAX 0.12's BufferedRef.input_output); "
    "a kernel grid has inputs and outputs"
)
INDEX_MAP_RANK = (
    "The index map of {name}, {map}, must take the grid's {grid} indices to "
    "{rank} block indices"
)
PARALLEL_REVISIT = (
    "Output {output} ({name}) visits block {block} in iterations {first} and "
    "{second}, which differ in parallel dimension {dim}: iterations of a "
    "parallel dimension run on different cores and must not share an output block"
)
PIPELINE_WRITES_INPUT = (
    "The pipeline's body writes {window}, in the window of input {name}: an input "
    "block is fetched again only when it changes, so later steps may read "
    "these writes instead of {name}"
)
IRREGULAR_INDEX_MAP = (
    "The index map of {name} changes its block irregularly over the grid: "
    "copyir keeps a pipeline's schedule as loops and needs block changes that "
    "an affine condition describes ({why})"
)
NOT_AT_TOP_LEVEL = (
    "{op} makes a buffer or a semaphore once per kernel: it must be at the top "
    "level of the kernel, not inside a loop or a when"
)
MALFORMED_INDEX = "Malformed index value: {why}"
HBM_LOAD = "Loads are only allowed on VMEM and SMEM references."  # Pallas
HBM_STORE = "Loads and stores are only allowed on VMEM and SMEM references."  # Pallas
SMEM_LOAD = "Can only load scalars from SMEM"  # Pallas
SMEM_STORE = "Can only store scalars to SMEM"  # Pallas
VMEM_SCALAR_STORE = "Cannot store scalars to VMEM"  # Pallas
COMPUTE_DTYPE = "Computation input {name} is {type}, but its destination is {dst}"
COMPUTE_SHAPE = (
    "Computation input {name} is {type}, not of its destination's shape ({dst})"
)
COMPUTE_FLOAT_LITERAL = "Float literal {literal} for an integer destination of {dtype}"
COMPUTE_LITERAL_RANGE = "Literal {literal} does not fit the destination's {dtype}"
COMPUTE_INT_DIVISION = "/ is for floats; the destination is {dtype}"
COMPUTE_BOOL_MINUS = (
    "- is not defined on bool: numpy and JAX refuse to negate or subtract booleans"
)
COMPUTE_MALFORMED = "Malformed computation: {why}"
COMPUTE_REGION_ARGUMENTS = (
    "A computation's region takes one argument per input: {inputs} inputs, "
    "{args} arguments"
)
COMPUTE_REGION_TYPE = (
    "A computation's region computes in its destination's {dtype}, not in {type}"
)
COMPUTE_REGION_OP = (
    "A computation's region holds scalar operations and ends with one "
    "scalar.yield, not {op}"
)
COMPUTE_REGION_OUTSIDE = (
    "A computation's region takes its inputs as arguments; {name} is defined outside it"
)
COMPUTE_TOO_LARGE = (
    "Computation too large: {count} operations once its shared values are "
    "written out, more than {limit}"
)

# Syntax and input.
SYNTAX = "{what}"
UNKNOWN_OPTION = "Unknown option {option} for {stmt} (expected {known})"
OPTION_VALUE = "Option {option} of {stmt} {why}"
DUPLICATE_OPTION = "Option {option} is given twice"
NESTED_TOO_DEEP = "Input is nested too deeply (more than {limit} levels)"
NOT_UTF8 = "Input is not UTF-8 text: {why}"
INT_RANGE = "Integer {value} does not fit in 64 bits"
INDEX_TOO_DEEP = "An index expression nests more than {limit} operations deep"
DIVIDES_BY_ZERO = "An index expression divides by zero"
TOO_DEEP = "Input is nested too deeply for the parser"
DUPLICATE_PARAM = "Kernel parameter {name} is defined twice"
NOT_IN_KERNEL = "{op} cannot appear inside a kernel"
NUMBER_TOO_LONG = "Number literal is too long"
MALFORMED_LOCATION = "Malformed location: {why}"
BLOCK_LABEL = (
    "Block label {label} is not a name: a label starts with a letter or one of _$.- "
    "(^bb0, ^body)"
)

# Lowering.
DOES_NOT_FIT = (
    "{name} needs {size} bytes of {space}, but only {free} of its {capacity} "
    "bytes are free in target {target}"
)
NEEDS_PASS = "{pass_name} needs {before} to have run first: {why}"

# Running a stream (the interpreter).
RUN_OUT_OF_BOUNDS = "DMA {end} {region} is out of bounds: {why}"
RUN_MISMATCHED_BUFFER = (
    "DMA {end} moves {dtype} elements, but buffer {name} holds {held}"
)
RUN_MISALIGNED = (
    "DMA {end} {region} starts {offset} bytes into an element of buffer {name} "
    "({item} bytes each)"
)
RUN_SELF_OVERLAP = "DMA source {src} and destination {dst} overlap"
RUN_RACE = (
    "Race: this DMA {action} {region} while the DMA started at {other} is in "
    "flight and {their} it"
)
RUN_UNINITIALIZED = "DMA reads {region}, which nobody wrote (first unwritten: {first})"
RUN_COMPUTE_UNINITIALIZED = (
    "Computation reads {region}, which nobody wrote (first unwritten: {first})"
)
RUN_ACCESS_RACE = (
    "Race: this {what} {action} {region} while the DMA started at {other} is in "
    "flight and {their} it"
)
PARALLEL_READS = (
    "Parallel loop {loop}: this {what} {action} {region}, which iteration "
    "{other} {their}; an iteration of a parallel loop reads only what it "
    "wrote itself or what was there before the loop"
)
PARALLEL_WRITES = (
    "Parallel loop {loop}: this {what} writes {region}, which iteration "
    "{other} writes too; two iterations of a parallel loop never write the "
    "same HBM element"
)
PARALLEL_DMA = (
    "Parallel loop {loop}: this wait finishes the DMA started {where}; a DMA "
    "is started and finished within one iteration of a parallel loop"
)
PARALLEL_OTHER_ACCESS = "iteration {other} {their} it here"
PARALLEL_LEFTOVER = (
    "Parallel loop {loop}: this {what} reads {region}, whose element {element} "
    "iterations {first} and {second} both write; after the loop it holds what "
    "the one that ran last wrote"
)
PARALLEL_WRITER = "iteration {iteration} writes it here"
RUN_SEMAPHORE_RANGE = "Semaphore {sem} is out of range: the program has {count}"
RUN_UNSATISFIABLE_WAIT = (
    "Wait on semaphore {sem} needs {need} bytes, but at most {available} bytes "
    "can still arrive"
)
RUN_LEFTOVERS = (
    "The program ends with {count} DMA(s) in flight: never waited, or waited "
    "for fewer bytes than they move"
)
RUN_SEMAPHORE_NOT_ZERO = "semaphore {sem} ends at {bytes} bytes, not zero"
RUN_SCOPE_IN_FLIGHT = (
    "This DMA of {bytes} bytes on semaphore {sem} is still in flight when the "
    "scope of {name} ends: wait for it inside the scope"
)
RUN_SCOPE_ENDS = "the scope, which ends before the DMA finishes"
RUN_SCOPE_SEMAPHORE = "semaphore {sem} ends the scope at {bytes} bytes, not zero"
RUN_UNKNOWN_INPUT = (
    "Input {name} matches no parameter of kernel {kernel} (parameters: {params})"
)
RUN_INPUT_MISMATCH = "Input {name} is {got}, but parameter {name} is {want}"
RUN_NO_INPUT = (
    "parameter {name} has no input: give --input {name}=FILE or --fill-inputs"
)
RUN_BYTES_IN_FLIGHT = "semaphore {sem} has {bytes} bytes in flight"
RUN_PARTLY_WRITTEN = (
    "Output {name} is written only in part: {unwritten} of its {size} elements "
    "keep poison, the first at {first}"
)
RUN_UNWRITTEN_WINDOW = (
    "DMA writes {region} from window memory the pipeline body did not write "
    "(the first at {first}): as Pallas writes a whole window back, it holds "
    "what the window's slot held before"
)
"""A warning: a pipeline's write-back copies stale window memory (a body
that wrote its output window only in part)."""
RUN_PADDING_OUTPUT = (
    "Output {name} holds the padding of a cut block (past an array's edge: "
    "the uninitialized value, or what the window's slot held): {count} of "
    "its {size} elements, the first at {first}"
)
RUN_OPAQUE_OUTPUT = (
    'Output {name} holds poison that opaque computation "{what}" wrote: '
    "{count} of its {size} elements, the first at {first}"
)
RUN_BAD_SEED = "The seed must be an integer from 0 to 2**63 - 1, got {seed}"
RUN_UNKNOWN_MODE = "Unknown completion mode {mode} (expected random, eager or on_wait)"
STREAM_MALFORMED = "Malformed DMA stream: {why}"
"""For streams read or built by hand; one that copyir's lowering made is
LOWERED_STREAM_INVALID, an internal error."""
LOWERED_STREAM_INVALID = "The lowering made an invalid DMA stream: {why}, at {where}"
# The limits of one run (copyir.limits):
TOO_MANY_ITERATIONS = (
    "{what} runs {count} iterations in all, more than the limit of {limit} "
    "that a run can check"
)
TOO_MANY_EVENTS = (
    "{what} brings the events the kernel runs to {count}, more than the limit "
    "of {limit} that a run can check"
)
INDEX_OVER_LIMIT = (
    "The index arithmetic of {name} reaches the limit of {limit} on a run's "
    "addresses over the loops' ranges"
)
OUT_OF_MEMORY = (
    "copyir ran out of memory: the program needs more than this machine has "
    "(a run holds at most {iterations} iterations of a loop nest and {events} "
    "events, at about {bytes} bytes each)"
)
CANNOT_READ_STREAM = "Cannot read DMA stream {name}: {why}"
STREAM_VERSION = (
    "it is a copyir DMA stream of format version {found}, and this copyir "
    "reads version {expected} only: lower the program again with this copyir"
)
"""The `why` of CANNOT_READ_STREAM for an `.npz` of another format version."""
RUN_NOT_A_BOX = (
    "DMA {end} {region} is not a box of buffer {name} {shape}: its "
    "{extents} elements with strides {strides} do not step along the "
    "buffer's dimensions"
)
CANNOT_ALLOCATE = "Cannot allocate {size} bytes of {space} for the stream: {why}"
ARRAY_INT_RANGE = "An integer in this array does not fit in 64 bits"
SEMI_AFFINE = (
    "An affine expression multiplies by constants only, not by a dimension or "
    "a symbol (semi-affine expressions are not supported)"
)
CANNOT_ALLOCATE_INPUT = "Cannot allocate {size} bytes for input {name}: {why}"

# Targets.
UNKNOWN_TARGET = "Unknown target {name} (built-in: {known}; or a .toml file)"
CANNOT_READ_TARGET = "Cannot read target {name}: {why}"
TARGET_NAME_TAKEN = "Target name {name} is taken by a built-in target"
TARGET_NO_TABLE = "Target {name} has no [{space}] table"
TARGET_ALIGNMENT = (
    "Target {name}: {space}.alignment must be a power of two, got {value}"
)
TARGET_FIELD = (
    "Target field {what} must be a byte count such as 4096 or '64 MiB', got {value}"
)
TOO_MANY_DIGITS = "an integer has too many digits"
TARGET_TOO_LARGE = "Target field {what} must be at most {limit} bytes, got {value}"

# The command line and the files it names (exit status 2).
CANNOT_READ = "cannot read {path}: {why}"
CANNOT_WRITE = "cannot write {path}: {why}"
TOO_LARGE_TO_HOLD = "the machine cannot hold it"
IS_A_DIRECTORY = "{path} is a directory"
NOT_A_REGULAR_FILE = "cannot read {path}: not a regular file"
OVERWRITES_INPUT = "refusing to overwrite the input file {path}"
NEEDS_EMIT = "-o needs --emit"
ONE_INPUT_FOR_OUTPUT = "-o takes one input file"
NPZ_NEEDS_OUTPUT = "the npz form needs -o FILE (or -o - for standard output)"
OUTPUT_NOT_NPZ = "--output must name an .npz file (or - for standard output)"
ONE_PROGRAM_FOR_OUTPUT = (
    "{option} takes one program, not one per part of --split-input-file"
)
BAD_SEED = "must be an integer from 0 to 2**63-1, got {value}"
INPUT_EMPTY_NAME = "--input {spec}: the name before = is empty"
INPUT_TWICE = "input {name} is given twice (again in {path})"
INPUT_NOT_NPY = "{path} is not a .npy array (give an .npz alone, without NAME=)"
INPUT_NEEDS_NAME = "{path} is a single array: give it a name, NAME={path}"
INPUT_TRUNCATED = "cannot read {path}: its data ends before {nbytes} bytes"
INPUT_SIZE_MISMATCH = (
    "Input {name} in {path} unpacks to {size} bytes, but parameter {name} "
    "({want}) takes {expected}"
)
UNKNOWN_PASS = "Unknown pass {name}{hint} (passes: {known})"
UNKNOWN_PASS_OPTION = "Unknown option {option} for pass {name}{hint} (options: {known})"
PASS_OPTION_VALUE = "Bad options for pass {name}: {why}"
PIPELINE_SYNTAX = "Malformed pass pipeline {spec}: {why}"
DID_YOU_MEAN_SUFFIX = " (did you mean {match}?)"

# --verify-diagnostics.
EXPECTED_NOT_PRODUCED = 'expected {severity} "{text}" was not produced'
UNEXPECTED_DIAGNOSTIC = "unexpected {severity}: {message}"
EXPECTATION_OFFSET = "The line offset of this expected-{severity} is too large"

# The Python API.
API_TYPE = "{function}() takes {accepted}, not {got}"
UNKNOWN_FORMAT = "Unknown format {format!r} (expected {formats})"
DMA_FORM_NEEDS_PROGRAM = (
    "The dma form prints a dma.program; lower the module first (copyir.lower)"
)

# Notes that help: a mismatch's two types, did-you-means and hints. Notes
# travel beside a message, which stays exact.
TYPES_NOTE = "{src} is {src_type}, {dst} is {dst_type}"
DID_YOU_MEAN = "did you mean {name}?"
HINT_SCOPE = (
    "an alloc or a semaphore directly in a scope { ... } is made afresh on every "
    "entry into it"
)
HINT_COMMENT = "comments start with # in copyir, not //"
HINT_AT = "copyir writes a view without .at: x[0:8], not x.at[0:8]"
HINT_DS = (
    "copyir writes pl.ds(start, size) without pl.: x[ds(8, 8)] for "
    "x[pl.ds(8, 8)] (or the slice x[8:16])"
)
HINT_NO_SEMAPHORE = (
    "a DMA names its semaphore after the destination: copy_start src -> dst, sem"
)

# The authoring syntax of loops, conditions, index expressions, copy
# descriptors, asynchronous window copies and computations (issue 8).
INDEX_NOT_AFFINE = "Index expression {expr} is not affine: {why}"
INDEX_MULTIPLIES = "it multiplies two index values"
INDEX_DIVIDES = "it divides by an index value"
INDEX_DIVISOR = (
    "Index expression {expr} divides by {divisor}: // and % take a positive constant"
)
INDEX_OPERATOR = (
    "Index expression {expr} uses {what}; index expressions take integers, "
    "index values and + - * // %"
)
INDEX_MIN_MAX_INSIDE = (
    "Index expression {expr} is inside another: {name}(...) takes a whole index; "
    "name it first, as in c = {name}(...), and compute with c"
)
TOO_MANY_PIECES = (
    "The mins and maxes of an index here split the loops' domain into more "
    "than {limit} affine pieces, more than an op may have"
)
INDEX_MAP_MIN_MAX = (
    "The index map of {name} uses {expr}: {call} in a pipeline's index map "
    "is not supported yet"
)
INDEX_MIN_MAX_ARGUMENTS = (
    "Index expression {expr} has {count} argument(s): {name} takes two or more"
)
NOT_AN_INDEX = "{name} is {type}, not an index value"
STATIC_INTEGER = "{what} must be a static integer, got {expr}"
DS_FORM = "ds takes a start and a static size, ds(start, size), got {expr}"
DS_MISPLACED = (
    "ds(start, size) slices one dimension and is written as a subscript, "
    "x[ds(start, size)], not in {expr}"
)
SLICE_NOT_STATIC = (
    "Slice {slice} of {expr} must have a static size, but its stop minus its "
    "start is {size}"
)
LOOP_RANGE = (
    "A loop runs over range(stop), range(start, stop) or grid(n, ...), not {expr}"
)
LOOP_INDEX_COUNT = (
    "{range} gives {dims} index(es) per iteration, but the loop names {count}"
)
LOOP_INDEX_REBOUND = (
    "{name} is the index of the {construct} at line {line} and cannot be rebound"
)
OUT_OF_SCOPE_INDEX = (
    "{name} is the index of the {construct} at line {line} and exists only "
    "inside that {construct}"
)
OUT_OF_SCOPE_NAME = (
    "{name} was defined at line {line} inside the body of the {construct} at "
    "line {body}, and exists only inside that body"
)
INDEX_TOO_LONG = "Index expression has {count} terms, more than the limit of {limit}"
CONDITION_TOO_LARGE = (
    "Condition {expr} has more than {limit} terms once written as an or of ands"
)
NOT_A_DESCRIPTOR = (
    "{call} needs a copy descriptor (c = async_copy src -> dst, sem), but {name} "
    "is {type}"
)
DEFINITION_TARGET = "{what} defines a name: write name = {what} ..., not {target} = ..."
WINDOW_NO_SEMAPHORE = (
    "buffered_copy {action} needs a semaphore after its destination: "
    "buffered_copy {action} src -> dst, sem, slot=s"
)
WINDOW_EXTRA_ITEM = (
    "buffered_copy takes one semaphore after its destination (and only when it "
    "starts or waits), then options; {expr} is not one"
)
COMPUTE_OPERATOR = (
    "Computations take + - * /, max, min and unary minus, not {what}: {expr}"
)
COMPUTE_ARGUMENTS = "{name} takes 2 arguments, got {count}: {expr}"
COMPUTE_INDEX_VALUE = (
    "{name} is an index value; a computation takes refs, views and numeric literals"
)
HINT_COMPUTE = "a computation writes into a ref with subscripts: {name}[...] = ..."

# The authoring syntax of pipelines (issue 9).
PIPELINE_BODY_NAMES = (
    "The pipeline's body names {count} value(s): its {windows} window(s), one "
    "per operand in spec order, then optionally its {rank} grid index(es), "
    "all of them or none"
)
INDEX_MAP_ARITY = (
    "The index map of {name} takes {count} parameter(s), but the grid has "
    "{rank} dimension(s): it takes one grid index per dimension"
)
INDEX_MAP_PARAMETER = "An index map's parameters are names, (i, j) -> (...), not {expr}"
INDEX_MAP_TWICE = "The index map of {name} names its parameter {param} twice"
INDEX_MAP_SCOPE = (
    "an index map's expressions name its own parameters only, {params}; "
    "name the body's grid indices after the windows to use them in the body"
)
DIMENSION_SEMANTICS = "A dimension's semantics is parallel or arbitrary, not {name}"
DIMENSION_SEMANTICS_COUNT = (
    "dimension_semantics gives {count} dimension(s), but the grid has {rank}"
)

# The Pallas frontend (issue 17): what a kernel uses that copyir cannot
# import yet is named with its Python line.
PALLAS_UNSUPPORTED = "{what} is not supported yet{where}"
PALLAS_NOT_AFFINE = (
    "The index expression {expr} is not affine: indices are sums of index "
    "values times constants, // and % by positive constants"
)
PALLAS_CONDITION_TOO_LARGE = (
    "The condition has {count} conjunctions in or-of-ands form; "
    "the most a when takes is {limit}"
)
PALLAS_CALL_INSIDE = (
    "A pallas_call inside `{primitive}` is not supported yet: copyir runs "
    "kernels called directly or inside `jax.jit`"
)
PALLAS_NEEDS_JAX = (
    'copyir\'s Pallas frontend needs JAX: pip install -e ".[pallas]" '
    "(or pip install jax)"
)
PALLAS_NO_FILE = "No such Python file: {path}"
PALLAS_NO_FUNCTION = "{path} has no function {name}"
PALLAS_USER_ERROR = "{path}: {name} raised {kind}: {message}"
PALLAS_NO_KERNEL = "{name} calls no pallas_call: there is no kernel to import"
