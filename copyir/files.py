"""Reading the files a command names, and writing its outputs safely.

Reading: a program is read whole, from a regular file or from standard
input (`-`); a device or a FIFO is refused before it is read (it could be
endless, or block). Input arrays are read lazily: each `.npy` header, or
`.npz` member header and size, is checked against the parameter it binds
before any data is read or decompressed. Nothing read is ever modified.

Writing (`write_output`): `-` is standard output. A regular file, or a new
path, is written to a temporary file in its directory that is then renamed
over it, so a reader never sees half a file and an interrupted write
(SIGINT, or SIGTERM, which raises while the write is under way) leaves
nothing behind. A symlink to a regular file has its target replaced and
stays a link. Devices and FIFOs are written through, never replaced. A new
file gets mode 0666 less the umask (0644 under the usual 022); a replaced
file keeps its mode. `check_output` finds an output that cannot be written
before the work starts, and `check_not_input` refuses an output that is one
of the files the command reads.

Outputs of `run` are one `.npz` keyed by parameter name that numpy reads
as it is. numpy has no bfloat16, so a bfloat16 member holds raw 2-byte
records (`V2`) and says so in its zip member comment, `copyir:bfloat16`;
`load_outputs` reads such a file back with bfloat16 restored.
"""

from __future__ import annotations

import contextlib
import errno
import io
import math
import os
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, BinaryIO

import numpy as np

from copyir import errors
from copyir.dtypes import DType, bfloat16
from copyir.errors import CopyIRError, InvocationError, Loc

if TYPE_CHECKING:
    import zipfile

    from copyir.stream import Stream


class FileError(InvocationError):
    """A file that cannot be read or written at all (exit status 2)."""


# -- programs -----------------------------------------------------------------


def read_bytes(path: str) -> tuple[bytes, str]:
    """The bytes of a file the command reads, and the name diagnostics use.

    `-` is standard input. Only a regular file is read: a device or a FIFO
    is refused before reading (opened without blocking, then checked).
    """
    if path == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    with _open_regular(path) as file:
        try:
            return file.read(), path
        except OSError as err:
            raise FileError(_cannot_read(path, err)) from None
        except MemoryError:
            why = errors.TOO_LARGE_TO_HOLD
            raise FileError(errors.CANNOT_READ.format(path=path, why=why)) from None


def decode_utf8(data: bytes, name: str) -> str:
    """Text as UTF-8; other bytes are a located `CopyIRError` (the program
    is wrong, not the command line)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        why = f"byte 0x{data[err.start]:02x} at offset {err.start}"
        raise CopyIRError(
            errors.NOT_UTF8.format(why=why), Loc(name, line, col)
        ) from None


def read_source(path: str) -> tuple[str, str]:
    """The text of a source file and the name diagnostics use for it."""
    data, name = read_bytes(path)
    return decode_utf8(data, name), name


def detect_format(name: str, data: bytes, given: str | None = None) -> str:
    """The form of a program: `cpy`, `mlir`, `dma` or `npz`.

    An explicit `--input-format` wins, then the file's suffix, then the
    content: a zip archive is a binary stream, text whose first line that
    is not blank or a comment starts with `dma.program` is a `.dma` stream,
    and one that starts like MLIR (`builtin.module`, an op name with a
    dialect prefix, a generic `"op"`) is the MLIR form. Anything else is the
    authoring syntax.
    """
    if given is not None:
        return given
    suffix = os.path.splitext(name)[1].lstrip(".")
    if suffix in ("cpy", "mlir", "dma", "npz"):
        return suffix
    if data.startswith(b"PK\x03\x04"):
        return "npz"
    for line in io.BytesIO(data):  # lazily: the first lines decide
        line = line.strip()
        if not line or line.startswith((b"#", b"//")):
            continue
        if line.startswith(b"dma.program"):
            return "dma"
        if line.startswith((b"builtin.module", b"module", b'"', b"copy.", b"dma.")):
            return "mlir"
        return "cpy"
    return "cpy"


@contextlib.contextmanager
def _open_regular(path: str) -> Iterator[BinaryIO]:
    """A regular file opened for reading; anything else is a `FileError`.

    `O_NONBLOCK` lets a FIFO open without a writer, so that it is refused
    rather than waited on.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise FileError(_cannot_read(path, err)) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        why = errors.IS_A_DIRECTORY if stat.S_ISDIR(mode) else errors.NOT_A_REGULAR_FILE
        raise FileError(why.format(path=path))
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as file:
        yield file


def _cannot_read(path: str, err: OSError) -> str:
    if isinstance(err, IsADirectoryError):
        return errors.IS_A_DIRECTORY.format(path=path)
    return errors.CANNOT_READ.format(path=path, why=err.strerror or err)


# -- outputs ------------------------------------------------------------------


def _cannot(path: str, code: int) -> FileError:
    """A write refused before it starts, in the system's words for `code`."""
    return FileError(errors.CANNOT_WRITE.format(path=path, why=os.strerror(code)))


def check_output(path: str | None) -> None:
    """Fail now, before any work, if `path` cannot be written.

    Only permissions and kinds are checked (`os.access`, `os.stat`): a FIFO
    is not opened here, since opening it waits for a reader.
    """
    if path is None or path == "-":
        return
    real = os.path.realpath(path)
    info = _stat(real, path)
    _check_names_file(path, info)
    if info is None:
        parent = os.path.dirname(real)
        if not os.path.isdir(parent):
            raise _cannot(path, errno.ENOENT)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise _cannot(path, errno.EACCES)
        return
    if stat.S_ISDIR(info.st_mode):
        raise _cannot(path, errno.EISDIR)
    writable = os.access(real, os.W_OK)
    if stat.S_ISREG(info.st_mode):  # replaced through a temporary file beside it
        writable = writable and os.access(os.path.dirname(real), os.W_OK | os.X_OK)
    if not writable:
        raise _cannot(path, errno.EACCES)


def _check_names_file(path: str, info: os.stat_result | None) -> None:
    """`out/`, `out/.`: a path that can only name a directory, which
    `realpath` forgets, is refused as `open(2)` refuses it, instead of
    writing a file `out`."""
    if not path:  # as open(2) refuses ""
        raise _cannot(path, errno.ENOENT)
    if not (path.endswith(("/", os.sep)) or os.path.basename(path) in (".", "..")):
        return
    if os.path.basename(path) in (".", "..") and not os.path.lexists(
        os.path.dirname(path) or "."
    ):  # `nodir/..`: the kernel walks nodir, which realpath skips
        raise _cannot(path, errno.ENOENT)
    if info is None:
        raise _cannot(
            path, errno.EISDIR if path.endswith(("/", os.sep)) else errno.ENOENT
        )
    if not stat.S_ISDIR(info.st_mode):
        raise _cannot(path, errno.ENOTDIR)


def check_not_input(output: str | None, inputs: Iterable[str]) -> None:
    """Refuse to write over any file the command reads (through a symlink
    or a hard link too)."""
    if output is None or output == "-":
        return
    for path in inputs:
        if path != "-" and _same_file(output, path):
            raise FileError(errors.OVERWRITES_INPUT.format(path=path))


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


Payload = str | bytes | Callable[[BinaryIO], None]
"""What `write_output` writes: text, bytes, or a function that writes to a
binary file (so that a large output is never held twice in memory)."""


def write_output(path: str | None, data: Payload) -> None:
    """Write an output file safely (see the module's docstring)."""
    if path is None or path == "-":
        _write_stdout(data)
        return
    real = os.path.realpath(path)
    info = _stat(real, path)
    _check_names_file(path, info)
    if info is not None and not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            raise _cannot(path, errno.EISDIR)
        try:  # a device or a FIFO: write through it, never replace it
            with open(path, "wb") as out:
                _writer(data)(out)
        except OSError as err:
            raise FileError(_cannot_write(path, err)) from None
        return
    mode = _new_file_mode() if info is None else stat.S_IMODE(info.st_mode)
    _replace(real, data, mode, path)


def _write_stdout(data: Payload) -> None:
    if isinstance(data, str):
        sys.stdout.write(data)
        return
    sys.stdout.flush()
    _writer(data)(sys.stdout.buffer)
    sys.stdout.buffer.flush()


def _writer(data: Payload) -> Callable[[BinaryIO], None]:
    if callable(data):
        return data
    payload = data.encode("utf-8") if isinstance(data, str) else data

    def write(out: BinaryIO) -> None:
        out.write(payload)

    return write


def _replace(target: str, data: Payload, mode: int, name: str) -> None:
    """Write `target` through a temporary file beside it and a rename."""
    directory, base = os.path.split(target)
    with _sigterm_raises():
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{base}.", dir=directory)
        except OSError as err:
            raise FileError(_cannot_write(name, err)) from None
        try:
            with os.fdopen(fd, "wb") as out:
                os.fchmod(out.fileno(), mode)
                _writer(data)(out)
            os.replace(tmp, target)
        except BaseException as err:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(err, OSError):
                raise FileError(_cannot_write(name, err)) from None
            raise


class Terminated(SystemExit):
    """SIGTERM arrived while an output was written (exit status 143)."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into an exception for the duration, so that the write's
    cleanup runs. Only where SIGTERM would kill the process anyway (the
    default handler, in the main thread); a caller's own handler is left in
    charge."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _new_file_mode() -> int:
    """0666 less the umask, as `open(2)` gives a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _stat(real: str, name: str) -> os.stat_result | None:
    try:
        return os.stat(real)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise FileError(_cannot_write(name, err)) from None


def _cannot_write(path: str, err: OSError) -> str:
    return errors.CANNOT_WRITE.format(path=path, why=err.strerror or err)


# -- input arrays ---------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """What an input must be: the shape and dtype of the parameter it binds."""

    shape: tuple[int, ...]
    dtype: DType

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{self.dtype.name}{list(self.shape)}"


def parameters(stream: Stream) -> dict[str, Param]:
    """The parameters of a stream, by name, as `load_inputs` checks them."""
    from copyir.dtypes import BY_NAME

    return {
        b.name: Param(tuple(b.shape), BY_NAME[b.dtype])
        for b in stream.buffers
        if b.param
    }


def load_inputs(
    specs: Iterable[str], params: Mapping[str, Param], kernel: str = "<kernel>"
) -> dict[str, np.ndarray]:
    """Arrays from `--input name=file.npy` and `--input file.npz` (each key).

    Every name must be a parameter's, and each array's shape and dtype (from
    its header) the parameter's, before its data is read; such mistakes are
    `InvocationError`s. A missing, unreadable or corrupt file is a
    `FileError`; a machine that cannot hold an input, a `CopyIRError`.
    """
    inputs: dict[str, np.ndarray] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if sep and not name:
            raise FileError(errors.INPUT_EMPTY_NAME.format(spec=spec))
        if not sep:
            path = spec
        for key, array in _read_input_file(path, name if sep else None, params, kernel):
            if key in inputs:
                raise FileError(errors.INPUT_TWICE.format(name=key, path=path))
            inputs[key] = array
    return inputs


def _read_input_file(
    path: str, name: str | None, params: Mapping[str, Param], kernel: str
) -> Iterator[tuple[str, np.ndarray]]:
    import zipfile

    if name is not None:
        _check_name(name, params, kernel)
    with _open_regular(path) as file:
        magic = file.read(6)
        file.seek(0)
        single = magic == b"\x93NUMPY"
        if name is not None and not single:
            raise FileError(errors.INPUT_NOT_NPY.format(path=path))
        if name is None and single:
            raise FileError(errors.INPUT_NEEDS_NAME.format(path=path))
        try:
            if name is not None:
                yield name, _read_array(file, path, name, params[name])
                return
            with zipfile.ZipFile(file) as archive:
                members = [(_key(info), info) for info in archive.infolist()]
                for key, _ in members:  # every name before any data
                    _check_name(key, params, kernel)
                for key, info in members:
                    with archive.open(info) as member:
                        array = _read_array(
                            member, path, key, params[key], info.file_size, info
                        )
                    yield key, array
        except CopyIRError:
            raise
        except _corrupt() as err:
            raise FileError(errors.CANNOT_READ.format(path=path, why=err)) from None


def _key(info: zipfile.ZipInfo) -> str:
    name = info.filename
    return name[: -len(".npy")] if name.endswith(".npy") else name


def _check_name(name: str, params: Mapping[str, Param], kernel: str) -> None:
    if name not in params:
        raise InvocationError(
            errors.RUN_UNKNOWN_INPUT.format(
                name=name, kernel=kernel, params=", ".join(params)
            )
        )


def _corrupt() -> tuple[type[BaseException], ...]:
    """What a damaged `.npy` or zip archive raises while read (an `except`
    evaluates it only when something was raised)."""
    import zipfile
    import zlib

    return (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error)


CHUNK_BYTES = 1 << 24
"""Input data is read in pieces of this many bytes (file objects that are
not raw files copy what they read once more)."""


def _read_array(
    file: IO[bytes],
    path: str,
    name: str,
    param: Param,
    size: int | None = None,
    info: zipfile.ZipInfo | None = None,
) -> np.ndarray:
    """One array, its header checked against `param` before its data is
    read; `size` is a zip member's uncompressed size, checked too."""
    shape, fortran, stored = _read_header(file)
    dtype = stored.newbyteorder("=") if stored.byteorder in "<>" else stored
    if _is_bfloat16(stored, info) or (
        _is_raw(stored, param.dtype.itemsize) and param.dtype.name == "bf16"
    ):
        dtype = stored = param.dtype.numpy
    got = f"{dtype.name}{list(shape)}"
    if shape != param.shape or dtype != param.dtype.numpy:
        raise InvocationError(
            errors.RUN_INPUT_MISMATCH.format(name=name, got=got, want=param)
        )
    if size is not None and size != file.tell() + param.nbytes:
        raise InvocationError(
            errors.INPUT_SIZE_MISMATCH.format(
                name=name, path=path, size=size, want=param, expected=param.nbytes
            )
        )
    try:
        flat = np.empty(param.nbytes // dtype.itemsize, stored)
    except (MemoryError, ValueError) as err:
        raise CopyIRError(
            errors.CANNOT_ALLOCATE_INPUT.format(size=param.nbytes, name=name, why=err)
        ) from None
    raw = flat.view(np.uint8).data
    done = 0
    while done < len(raw):
        # typeshed's IO[bytes] has no readinto; both readers here do (a
        # BufferedReader, a ZipExtFile)
        count = file.readinto(raw[done : done + CHUNK_BYTES])  # pyright: ignore[reportAttributeAccessIssue]
        if not count:
            raise FileError(
                errors.INPUT_TRUNCATED.format(path=path, nbytes=param.nbytes)
            )
        done += count
    if stored != dtype:  # stored in the other byte order
        flat = flat.astype(dtype)
    return flat.reshape(shape, order="F" if fortran else "C")


def _read_header(file: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    """An `.npy` header, without reading the data after it."""
    version = np.lib.format.read_magic(file)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(file)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(file)
    raise ValueError(f"unsupported .npy version {version[0]}.{version[1]}")


BFLOAT16_COMMENT = b"copyir:bfloat16"


def _is_raw(dtype: np.dtype, itemsize: int) -> bool:
    """Raw records of a dtype numpy does not know, as `.npy` keeps them."""
    return dtype.kind == "V" and dtype.names is None and dtype.itemsize == itemsize


def _is_bfloat16(dtype: np.dtype, info: zipfile.ZipInfo | None) -> bool:
    return info is not None and info.comment == BFLOAT16_COMMENT and _is_raw(dtype, 2)


# -- output arrays ---------------------------------------------------------------


def save_outputs(path: str | None, arrays: Mapping[str, np.ndarray]) -> None:
    """All arrays in one `.npz`, written safely (`-` is standard output).

    The members are written one by one rather than through `np.savez(**)`,
    whose own keyword arguments (`file`, `allow_pickle`) would swallow
    parameters of those names; a bfloat16 member is marked in its comment.
    """

    import zipfile

    def write(out: BinaryIO) -> None:
        with zipfile.ZipFile(out, "w") as archive:
            for name, array in arrays.items():
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                if array.dtype.name == "bfloat16":
                    info.comment = BFLOAT16_COMMENT
                with archive.open(info, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, array, allow_pickle=False)

    write_output(path, write)


def load_outputs(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The arrays of an output `.npz` of `copyir run`, by parameter name,
    with bfloat16 restored (numpy alone reads those members as `V2`)."""
    import zipfile

    path = os.fspath(path)
    arrays = {}
    with _open_regular(path) as file:
        try:
            with zipfile.ZipFile(file) as archive:
                for info in archive.infolist():
                    with archive.open(info) as member:
                        array = np.lib.format.read_array(member, allow_pickle=False)
                    if _is_bfloat16(array.dtype, info):
                        array = array.view(bfloat16())
                    arrays[_key(info)] = array
        except _corrupt() as err:
            raise FileError(errors.CANNOT_READ.format(path=path, why=err)) from None
    return arrays


def written_parameters(stream: Stream) -> set[str]:
    """The parameters some `dma.start` of the stream writes, in any
    iteration: its destination address lies inside the parameter's bytes in
    HBM."""
    from copyir.expand import expand
    from copyir.machine import SPACES
    from copyir.stream import START

    trace = expand(stream)
    rows = stream.instructions[trace.row]
    hbm = (rows["op"] == START) & (rows["dst_space"] == SPACES.index("hbm"))
    params = sorted(
        (b for b in stream.buffers if b.param and b.space == "hbm"),
        key=lambda b: b.address,
    )
    if not params or not hbm.any():
        return set()
    begins = np.array([b.address for b in params], dtype=np.int64)
    ends = np.array([b.address + b.nbytes for b in params], dtype=np.int64)
    addresses = trace.dst_address[hbm]
    index = np.searchsorted(begins, addresses, side="right") - 1
    inside = (index >= 0) & (addresses < ends[np.maximum(index, 0)])
    return {params[i].name for i in np.unique(index[inside])}


__all__ = [
    "FileError",
    "Param",
    "check_not_input",
    "check_output",
    "decode_utf8",
    "detect_format",
    "load_inputs",
    "load_outputs",
    "read_bytes",
    "read_source",
    "save_outputs",
    "write_output",
    "written_parameters",
]
