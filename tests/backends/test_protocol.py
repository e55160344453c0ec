"""The DMA protocol's verdicts on races within one buffer, crafted streams and
helpful notes, and the
stream validator's, each checked exactly; then the checker's work counted
at N and 2N, so that no check grows with the program squared."""

from __future__ import annotations

import io
import json
import warnings

import numpy as np
import pytest
from conftest import EXAMPLES
from copyir.backends import overlaps, protocol
from copyir.backends.interpreter import MODES, Executable, check_stream, fill_inputs
from hypothesis import given, settings
from hypothesis import strategies as st

import copyir
from copyir import dma_schema as schema
from copyir import errors
from copyir.cli import main
from copyir.errors import CopyIRError, CopyIRWarning
from copyir.stream import (
    COMPUTE,
    FORMAT_VERSION,
    START,
    WAIT,
    Buffer,
    Stream,
    instruction_dtype,
    load_npz,
    read_dma,
    save_npz,
)


def stream_of(text: str, name: str = "k.cpy") -> Stream:
    return copyir.to_stream(copyir.lower(copyir.parse(text, name)))


def run_error(text: str, inputs: dict, name: str = "k.cpy") -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        copyir.run(copyir.parse(text, name), inputs)
    return caught.value


# -- races within one buffer --------------------------------------------------

SAME_BUFFER = """\
kernel k(x: f32[8], y: f32[4]) {
  s1 = semaphore
  s2 = semaphore
  copy_start x[0:4] -> x[4:8], s1
  copy_start y[0:4] -> x[0:4], s2
  copy_wait x[0:4] -> x[4:8], s1
  copy_wait y[0:4] -> x[0:4], s2
}
"""


def test_writing_the_source_of_a_same_buffer_dma_is_a_race():
    inputs = {"x": np.arange(8, dtype=np.float32), "y": np.ones(4, np.float32)}
    err = run_error(SAME_BUFFER, inputs)
    assert str(err) == errors.RUN_RACE.format(
        action="writes", region="x[0:4]", other="k.cpy:4:3", their="reads"
    )
    assert err.loc.line == 5
    assert err.notes[0].loc.line == 4


def test_the_same_buffer_race_through_the_cli(tmp_path, capsys):
    path = tmp_path / "k.cpy"
    path.write_text(SAME_BUFFER)
    assert main(["run", str(path), "--fill-inputs", "iota"]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith(f"{path}:5:3: error: Race: this DMA writes x[0:4]")


def test_a_sync_copy_leaf_that_writes_an_earlier_leafs_source():
    text = "kernel k(x: f32[8], y: f32[4]) {\n  sync_copy (x[0:4], y) -> (x[4:8], x[0:4])\n}\n"
    inputs = {"x": np.arange(8, dtype=np.float32), "y": np.ones(4, np.float32)}
    err = run_error(text, inputs)
    assert str(err) == (
        errors.RUN_RACE.format(
            action="writes",
            region="x[0:4]",
            other="k.cpy:2:3 leaf [0]",
            their="reads",
        )
        + ", at leaf [1]"
    )


def test_a_same_buffer_copy_once_waited_is_correct():
    text = (
        "kernel k(x: f32[8], y: f32[4]) {\n  s1 = semaphore\n  s2 = semaphore\n"
        "  copy_start x[0:4] -> x[4:8], s1\n  copy_wait x[0:4] -> x[4:8], s1\n"
        "  copy_start y[0:4] -> x[0:4], s2\n  copy_wait y[0:4] -> x[0:4], s2\n}\n"
    )
    x = np.arange(8, dtype=np.float32)
    y = np.full(4, 9, np.float32)
    for mode in MODES:
        out = copyir.run(copyir.parse(text), {"x": x, "y": y}, mode=mode)["x"]
        assert list(out) == [9, 9, 9, 9, 0, 1, 2, 3]


def test_buffers_that_overlap_in_a_hand_made_stream_are_refused():
    text = copyir.dma_text(
        copyir.lower(copyir.parse((EXAMPLES / "manual.cpy").read_text()))
    )
    moved = text.replace('"y" "hbm" 32768', '"y" "hbm" 16384', 1)
    assert moved != text
    with pytest.raises(CopyIRError) as caught:
        read_dma(moved, "m.dma").validate()
    assert str(caught.value) == errors.STREAM_MALFORMED.format(
        why="buffers x (hbm[0:32768]) and y (hbm[16384:49152]) overlap"
    )


# -- crafted streams ------------------------------------------------------------


def small_stream(**start) -> Stream:
    """x: i32[8] and y: i32[8] in HBM, and one start from x to y, waited."""
    x = Buffer("x", "hbm", 0, "i32", (8,), True)
    y = Buffer("y", "hbm", 512, "i32", (8,), True)
    table = np.zeros(2, instruction_dtype(1))
    table["origin"] = -1
    table["op"] = START, WAIT
    table["bytes"] = 32
    first = table[0]
    first["dst_space"] = first["src_space"] = 0
    first["dst_address"] = 512
    first["dtype"], first["rank"] = 3, 1  # i32
    first["shape"] = (8,)
    first["src_strides"] = first["dst_strides"] = (1,)
    for key, value in start.items():
        first[key] = value
    return Stream("k", "default", 1, [x, y], table, source="s.npz")


def validation_error(stream: Stream) -> str:
    with pytest.raises(CopyIRError) as caught:
        stream.validate()
    return str(caught.value)


def test_a_valid_small_stream_runs():
    x = np.arange(8, dtype=np.int32)
    assert list(copyir.run(small_stream(), {"x": x})["y"]) == list(range(8))


def test_a_start_whose_byte_count_is_not_its_shape():
    assert validation_error(small_stream(bytes=16)) == errors.STREAM_MALFORMED.format(
        why="instruction 0: a start of [8] i32 elements that moves 16 bytes, not 32"
    )


def test_a_dma_of_another_dtype_than_its_buffers():
    message = validation_error(small_stream(dtype=9, bytes=32))  # f32 between i32s
    assert message == errors.RUN_MISMATCHED_BUFFER.format(
        end="source", dtype="f32", name="x", held="i32"
    )


def test_element_counts_past_64_bits():
    stream = small_stream(shape=(2**61,))
    assert validation_error(stream) == errors.STREAM_MALFORMED.format(
        why=f"instruction 0: a start of more than {2**62} bytes"
    )
    table = np.zeros(2, instruction_dtype(2))
    table["origin"] = -1
    table["op"] = START, WAIT
    table[0]["rank"], table[0]["dtype"] = 2, 3
    table[0]["shape"] = (2**40, 2**40)
    big = Stream("k", "default", 1, small_stream().buffers, table, source="s.npz")
    assert "a start of more than" in validation_error(big)


CODE_COLUMNS = [c for c in schema.columns() if c.codes is not None]


@pytest.mark.parametrize("column", CODE_COLUMNS, ids=lambda c: c.name)
@pytest.mark.parametrize("past", [0, 100])
def test_every_code_column_is_range_checked_before_it_is_read(column, past):
    """A code out of range is one `Malformed DMA stream` naming it, never
    an index error: a dtype of 100 was read for the byte-count message."""
    value = column.codes + past
    if value > np.iinfo(column.dtype).max:
        pytest.skip("the column cannot hold it")
    message = validation_error(small_stream(**{column.name: value}, bytes=16))
    assert message == errors.STREAM_MALFORMED.format(
        why=f"instruction 0: {column.bad_code(value)}"
    )


def test_a_loop_reference_in_a_stream_without_loops():
    stream = small_stream(loop=1)
    assert validation_error(stream) == errors.STREAM_MALFORMED.format(
        why="instruction 0: loop 1 of 0"
    )


@pytest.mark.parametrize("field", [{"loop": 1}, {"sem_map": 7}, {"dtype": 100}])
def test_the_api_protocol_check_of_a_malformed_file(field, tmp_path):
    """`check_protocol(Path)` validates the stream before anything reads
    it (it used to rebuild the ops first: an IndexError)."""
    path = tmp_path / "s.npz"
    save_npz(small_stream(**field), path)
    with pytest.raises(CopyIRError) as caught:
        copyir.check_protocol(path)
    assert str(caught.value).startswith(errors.STREAM_MALFORMED.format(why=""))
    assert str(caught.value.loc) == f"{path}:1:1"


def test_printing_a_malformed_stream_is_its_error():
    with pytest.raises(CopyIRError) as caught:
        copyir.to_text(small_stream(loop=1), "dma")
    assert str(caught.value) == errors.STREAM_MALFORMED.format(
        why="instruction 0: loop 1 of 0"
    )


def test_a_computation_whose_operands_have_another_rank():
    """An operand's strides come from the header, its shape from the row:
    a row of another rank is malformed, not a zip() error in the run."""
    stream = copyir.to_stream(copyir.lower(EXAMPLES / "loop_compute.cpy"))
    row = int(np.flatnonzero(stream.instructions["op"] == COMPUTE)[0])
    stream.instructions["rank"][row] = 0
    number = stream.instructions["compute"][row]
    assert validation_error(stream) == errors.STREAM_MALFORMED.format(
        why=f"instruction {row}: a bad operand of compute {number}"
    )


def test_a_destination_whose_elements_overlap_is_refused():
    """The 300-byte stream of 2**60 elements that used to hang, and a
    smaller stride-0 destination: neither is a box."""
    huge = small_stream(shape=(2**60,), dst_strides=(0,), src_strides=(0,))
    huge.instructions["bytes"][0] = 2**62  # what it claims to move
    assert "a start of more than" in validation_error(huge)
    small = small_stream(dst_strides=(0,))
    assert validation_error(small) == errors.RUN_NOT_A_BOX.format(
        end="destination",
        region="hbm[512:516]",
        name="y",
        shape=[8],
        extents=[8],
        strides=[0],
    )


@pytest.mark.parametrize(
    "meta",
    [
        {"buffers": "x"},
        {"buffers": [["x", "hbm", 0, "i32", [8], True, "extra"]]},
        {"buffers": [["x", "hbm", "0", "i32", [8], True]]},
        {"origins": [[None, 0, 0]]},
        {"semaphores": "one"},
        {"kernel": ["k"]},
        {"semaphore_names": [["s", 0, [[1]]]]},
    ],
)
def test_metadata_of_the_wrong_shape_is_one_error(meta, tmp_path):
    stream = small_stream()
    data = io.BytesIO()
    save_npz(stream, data)
    with np.load(io.BytesIO(data.getvalue())) as loaded:
        header = json.loads(str(loaded["meta"]))
        table = loaded["instructions"]
    header.update(meta)
    path = tmp_path / "s.npz"
    np.savez(path, meta=np.array(json.dumps(header)), instructions=table)
    with pytest.raises(CopyIRError) as caught:
        load_npz(str(path), "s.npz")
    assert str(caught.value).startswith("Cannot read DMA stream s.npz: ")


@pytest.mark.parametrize("version", [5, 7, None])
def test_an_npz_of_another_format_version_is_one_clear_error(version, tmp_path):
    """An older (or newer) binary stream names both versions, never a
    table misread as this version's."""
    data = io.BytesIO()
    save_npz(small_stream(), data)
    with np.load(io.BytesIO(data.getvalue())) as loaded:
        header = json.loads(str(loaded["meta"]))
        table = loaded["instructions"]
    header["version"] = version
    path = tmp_path / "s.npz"
    np.savez(path, meta=np.array(json.dumps(header)), instructions=table)
    with pytest.raises(CopyIRError) as caught:
        load_npz(str(path), "s.npz")
    assert str(caught.value) == errors.CANNOT_READ_STREAM.format(
        name="s.npz",
        why=errors.STREAM_VERSION.format(found=version, expected=FORMAT_VERSION),
    )
    assert str(caught.value.loc) == "s.npz:1:1"


def test_metadata_nested_too_deep_is_one_error(tmp_path):
    path = tmp_path / "s.npz"
    deep = "[" * 100_000 + "]" * 100_000
    np.savez(path, meta=np.array(deep), instructions=small_stream().instructions)
    with pytest.raises(CopyIRError) as caught:
        load_npz(str(path), "s.npz")
    assert str(caught.value).startswith("Cannot read DMA stream s.npz: ")


# -- diagnostics that help -------------------------------------------------------


def test_a_parameter_without_input_is_named():
    text = "kernel k(x: f32[8], y: f32[8]) {\n  sync_copy x -> y\n}\n"
    err = run_error(text, {})
    assert str(err) == errors.RUN_UNINITIALIZED.format(region="x[0:8]", first="x[0]")
    assert [n.message for n in err.notes] == [errors.RUN_NO_INPUT.format(name="x")]


def test_an_unsatisfiable_wait_notes_the_semaphores_still_in_flight():
    text = (
        "kernel k(x: f32[8], y: f32[8]) {\n  s = semaphore\n  t = semaphore\n"
        "  copy_start x -> y, t\n  copy_wait x -> y, s\n  copy_wait x -> y, t\n}\n"
    )
    err = run_error(text, {"x": np.zeros(8, np.float32)})
    assert str(err) == errors.RUN_UNSATISFIABLE_WAIT.format(
        sem="s", need=32, available=0
    )
    assert [n.message for n in err.notes] == [
        errors.RUN_BYTES_IN_FLIGHT.format(sem="t", bytes=32)
    ]


def test_an_output_written_in_part_gets_a_warning():
    text = "kernel k(x: f32[2], y: f32[4, 2]) {\n  sync_copy x -> y[1]\n}\n"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        copyir.run(copyir.parse(text, "k.cpy"), {"x": np.zeros(2, np.float32)})
    (warning,) = [w.message for w in caught if isinstance(w.message, CopyIRWarning)]
    assert str(warning) == errors.RUN_PARTLY_WRITTEN.format(
        name="y", unwritten=6, size=8, first="y[0, 0]"
    )
    assert warning.loc.line == 1


def test_an_output_written_whole_gets_no_warning():
    text = "kernel k(x: f32[4, 2], y: f32[4, 2]) {\n  sync_copy x[0:2] -> y[0:2]\n  sync_copy x[2:4] -> y[2:4]\n}\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error", CopyIRWarning)
        copyir.run(copyir.parse(text), {"x": np.zeros((4, 2), np.float32)})


def test_the_data_free_check_finds_races_without_inputs():
    stream = stream_of(SAME_BUFFER)
    with pytest.raises(CopyIRError) as caught:
        check_stream(stream)
    assert str(caught.value).startswith("Race: this DMA writes x[0:4]")
    verdict = check_stream(stream_of((EXAMPLES / "double_buffer.cpy").read_text()))
    assert len(verdict.starts) == 8


# -- the Python API ----------------------------------------------------------------


def test_a_later_run_never_changes_earlier_results():
    path = EXAMPLES / "double_buffer.cpy"
    stream = stream_of(path.read_text(), str(path))
    program = Executable(stream, {"x"}, "random", 0)
    x1 = np.ones((4, 8, 128), np.float32)
    first = program.run({"x": x1})["y"]
    kept = first.copy()
    second = program.run({"x": np.full((4, 8, 128), 2, np.float32)})["y"]
    assert np.array_equal(first, kept)
    assert not np.shares_memory(first, second)


# -- work that must grow linearly -----------------------------------------------------


def in_flight_reads(n: int) -> Stream:
    """N DMAs in flight at once, all reading the whole of x, each writing
    its own row of buf; then all waited on one semaphore."""
    x = Buffer("x", "hbm", 0, "f32", (128,), True)
    buf = Buffer("buf", "vmem", 0, "f32", (n, 128), False)
    table = np.zeros(2 * n, instruction_dtype(1))
    table["origin"] = -1
    starts, waits = table[:n], table[n:]
    starts["op"], waits["op"] = START, WAIT
    starts["bytes"] = waits["bytes"] = 512
    starts["dst_space"] = 1
    starts["dst_address"] = np.arange(n) * 512
    starts["dtype"], starts["rank"], starts["shape"] = 9, 1, (128,)
    starts["src_strides"] = starts["dst_strides"] = (1,)
    return Stream("k", "default", 1, [x, buf], table)


def column_dmas(n: int, sems: int) -> Stream:
    """N column DMAs of a (64, N) buffer in flight at once, on `sems`
    semaphores, then waited: byte spans that all cover the buffer."""
    x = Buffer("x", "hbm", 0, "f32", (64, n), True)
    buf = Buffer("buf", "vmem", 0, "f32", (64, n), False)
    table = np.zeros(2 * n, instruction_dtype(1))
    table["origin"] = -1
    starts, waits = table[:n], table[n:]
    starts["op"], waits["op"] = START, WAIT
    starts["bytes"] = waits["bytes"] = 256
    starts["dst_space"] = 1
    starts["src_address"] = starts["dst_address"] = np.arange(n) * 4
    starts["dtype"], starts["rank"], starts["shape"] = 9, 1, (64,)
    starts["src_strides"] = starts["dst_strides"] = (n,)
    starts["sem"] = waits["sem"] = np.arange(n) % sems
    return Stream("k", "default", sems, [x, buf], table)


def candidates(stream: Stream) -> int:
    verdict = check_stream(stream)
    return verdict.stats.candidates


@pytest.mark.parametrize(
    "build",
    [
        in_flight_reads,
        lambda n: column_dmas(n, 1),
        lambda n: column_dmas(n, n),  # N semaphores
    ],
    ids=["reads of one buffer", "column DMAs", "N semaphores"],
)
def test_race_candidates_grow_linearly(build):
    small, large = candidates(build(2000)), candidates(build(4000))
    assert large <= 2.3 * max(small, 1), (small, large)


def test_the_index_orders_by_position_when_time_would_pair_everyone():
    stats = overlaps.Stats()
    stream = column_dmas(3000, 1)
    verdict = check_stream(stream)
    assert verdict.stats.orders.get("dimension 1", 0) > 0
    assert verdict.stats.candidates < 3 * 3000
    del stats


def test_on_wait_moves_each_dma_once():
    stream = column_dmas(3000, 3000)
    program = Executable(stream, {"x"}, "on_wait")
    assert sorted(start for _, start in program.completions) == list(range(3000))
    assert all(moment >= 3000 for moment, _ in program.completions)


def test_protocol_check_of_a_large_ring_agrees_with_a_walk():
    """The vectorised verdict against a plain walk of the DMA protocol's rule
    (docs/protocol.md): every DMA finishes at the wait right after it."""
    stream = stream_of((EXAMPLES / "double_buffer.cpy").read_text())
    verdict = check_stream(stream)
    table = stream.instructions
    for start, finish in zip(verdict.starts, verdict.finish, strict=True):
        sem = table["sem"][start]
        later = [
            i
            for i in range(start + 1, len(table))
            if table["op"][i] == WAIT and table["sem"][i] == sem
        ]
        assert finish == later[0]
    assert isinstance(verdict, protocol.Verdict)


def test_fill_inputs_still_binds_everything():
    stream = stream_of((EXAMPLES / "roundtrip.cpy").read_text())
    assert sorted(fill_inputs(stream, {}, "zeros")) == ["a", "b", "out_a", "out_b"]


def test_verify_protocol_finds_races_without_inputs(tmp_path, capsys):
    path = tmp_path / "k.cpy"
    path.write_text(SAME_BUFFER)
    assert main(["verify", str(path)]) == 0  # statically fine
    assert main(["verify", "--protocol", str(path)]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert first == (
        f"{path}:5:3: error: "
        + errors.RUN_RACE.format(
            action="writes", region="x[0:4]", other=f"{path}:4:3", their="reads"
        )
    )
    with pytest.raises(CopyIRError):
        copyir.check_protocol(path)


@pytest.mark.parametrize("name", ["double_buffer", "windows", "manual", "roundtrip"])
def test_verify_protocol_accepts_the_examples(name):
    assert main(["verify", "--protocol", str(EXAMPLES / f"{name}.cpy")]) == 0


# -- uninitialised reads by boxes, against the replay ------------------------------


def box_table(events, provided: bool) -> tuple[protocol.BoxAccesses, protocol.Memory]:
    """One (4, 6) buffer's accesses: (event, role, box) with role 0 a
    computation's read, 1 a write, 2 an invalidation, 3 a stale one, 4 a
    DMA's read, and box a (lo, hi) pair per dimension."""
    count = len(events)
    lo = np.array([[b[0][0], b[1][0]] for _, _, b in events], np.int64).reshape(-1, 2)
    hi = np.array([[b[0][1], b[1][1]] for _, _, b in events], np.int64).reshape(-1, 2)
    role = np.array([r for _, r, _ in events], np.int64)
    ends = protocol.BoxAccesses(
        event=np.array([e for e, _, _ in events], np.int64),
        buffer=np.zeros(count, np.int64),
        lo=lo,
        hi=hi,
        write=(role > 0) & (role < 4),
        read=(role == 0) | (role == 4),
        instant=role != 4,
        invalidate=(role == 2) | (role == 3),
        stale=role == 3,
    )
    memory = protocol.Memory(
        np.array([[4, 6]]), np.array([[6, 1]]), np.array([provided]), np.array([True])
    )
    return ends, memory


SLOTS = [((0, 2), (0, 3)), ((0, 2), (3, 6)), ((2, 4), (0, 6)), ((1, 3), (2, 5))]
"""The first three are disjoint; the last overlaps each of them."""


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 12), st.integers(0, 4), st.sampled_from(range(len(SLOTS)))
        ),
        min_size=1,
        max_size=30,
    ),
    st.booleans(),
)
def test_reads_settled_by_boxes_agree_with_the_replay(events, provided):
    events = [(e, r, SLOTS[b]) for e, r, b in events]
    ends, memory = box_table(events, provided)
    rows = np.arange(len(events))
    reads, writes = rows[ends.read], rows[ends.write & ~ends.invalidate]
    invalid = rows[ends.invalidate]
    by_boxes = protocol._by_boxes(ends, memory, 0, reads, writes, invalid)
    replayed = protocol._replay_buffer(ends, memory, 0, reads, writes, invalid)
    if any(b == SLOTS[3] for _, _, b in events) and len({b for _, _, b in events}) > 1:
        assert by_boxes is protocol._MIXED
        return
    assert not isinstance(by_boxes, protocol._Mixed)
    failing, copied = by_boxes
    assert failing == replayed[0]
    if failing is None:  # the replay stops at the first failing read
        assert copied == replayed[1]
