"""Run jax's vendored Pallas TPU tests and doc kernels on the CPU, and
collect every `pallas_call` they execute as a unit of the corpus.

    python benchmarks/corpus/collect.py [--jobs J] [--test-timeout S]
        [--budget S] [--source-budget S] [--on-unit MODULE:FUNCTION]
        [--save FILE] [SOURCE ...]

A source is a vendored test file (`tests/pallas/*_test.py`, every test
method and every absl `parameterized` case of it) or a doc page's code
(`docs/pallas/tpu/*.py`, cell by cell, in one namespace). Each source runs
in worker processes (`--jobs` at a time, a test file split in `--jobs`
shards) that import jax once and run the cases one after the other; a case
that runs past `--test-timeout` or kills its worker is recorded as such and
the worker starts again after it; `--source-budget` bounds each shard of a
source (the ops' tests have hundreds of cases each) and `--budget` the
whole collection.

In a worker, every `pallas_call` is forced into Pallas' TPU interpret mode
(`pltpu.InterpretParams()`), and each one executed, eagerly or under
`jax.jit`, becomes a `Unit`: the case's id, the call's index within the
case, the `pallas_call` equation's parameters and its concrete operands.
Units hold jaxprs and live only in the worker: `--on-unit` names a
function that receives each `Unit` there, in the worker, right after its
case, and returns something small and picklable (`benchmarks/
pallas_corpus.py` passes its `compare_unit`). The parent gets back one
picklable `Outcome` per case: its status (ok, failed, skipped, timeout,
crashed, not run), the reason, and a `UnitResult` per unit (operand shapes
and dtypes, and what `--on-unit` returned).

jax's tests skip unless on a TPU; the worker pretends to be one (the
vendored files stay as they are): `jtu.device_under_test()` is "tpu",
`jtu.is_device_tpu*` answer for `TPU_KIND`, and Pallas' `tpu_info` reads
that kind (interpret mode reads it too, for the tiling of 1-D arrays). A
case skipped there runs again as the CPU it is, for the tests written for
the CPU interpreter (`INTERPRET = True` classes, `tpu_pallas_interpret_*`).
The CPU has `CPU_DEVICES` devices for the distributed tests, one for the
others.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import functools
import importlib
import importlib.util
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from unittest import mock

HERE = Path(__file__).resolve().parent
TAG = "jax-v0.10.2"
CORPUS = HERE / TAG
TPU_KIND = "TPU v6 lite"
TPU_GENERATION = 6
#: CPU devices for the sources that need several (jax's own test targets
#: run these on several devices, the others on one: some tests skip unless).
MULTI_DEVICE = ("distributed", "all_gather")
CPU_DEVICES = 4
#: The part of a test id that names the worker's slice of a source.
SHARD = re.compile(r"^(?P<path>.+?)(?:@(?P<k>\d+)/(?P<n>\d+))?$")


@dataclasses.dataclass
class Unit:
    """One `pallas_call` as a case executed it (in the worker only)."""

    test_id: str
    index: int
    name: str
    params: dict[str, Any]
    operands: list[Any]


@dataclasses.dataclass(frozen=True)
class UnitResult:
    """What the parent gets back of a unit."""

    test_id: str
    index: int
    name: str
    operands: tuple[tuple[tuple[int, ...], str], ...]
    result: Any = None


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One case: a test parameterisation or a doc cell."""

    test_id: str
    source: str
    status: str  # ok failed skipped timeout crashed "not run"
    reason: str = ""
    device: str = ""  # the device the case pretended to run on
    seconds: float = 0.0
    units: tuple[UnitResult, ...] = ()


def sources() -> list[str]:
    """The vendored sources, relative to CORPUS: Pallas' own TPU tests, the
    doc pages, then the tests of `ops/tpu` (hundreds of cases each)."""
    tests = sorted(CORPUS.glob("tests/pallas/*_test.py"))
    pallas = [p for p in tests if p.name.startswith("tpu_pallas_")]
    ops = [p for p in tests if p not in pallas]
    docs = sorted(CORPUS.glob("docs/pallas/tpu/*.py"))
    return [str(p.relative_to(CORPUS)) for p in [*pallas, *docs, *ops]]


# --- The worker: one source (or a shard of a test file) in one process ---


def prepare_worker(source: str) -> None:
    """Configure jax and make the vendored modules the ones imported."""
    from absl import flags

    flags.FLAGS(["collect"])
    import jax

    several = any(word in source for word in MULTI_DEVICE)
    jax.config.update("jax_num_cpu_devices", CPU_DEVICES if several else 1)
    import jax._src
    import jax._src.pallas
    import jax.experimental.pallas.ops.tpu as ops_tpu

    # Test helpers jax's wheel leaves out, and the vendored ops first.
    jax._src.__path__.append(str(CORPUS / "jax/_src"))
    jax._src.pallas.__path__.append(str(CORPUS / "jax/_src/pallas"))
    ops_tpu.__path__.insert(0, str(CORPUS / "jax/experimental/pallas/ops/tpu"))
    from jax._src.pallas.mosaic import tpu_info

    tpu_info.get_device_kind = lambda: TPU_KIND
    tpu_info.get_num_device_cores = lambda: 1
    # A CPU device has no `num_cores`: a core mesh without one has one core.
    from jax._src.pallas.mosaic import core
    from jax.experimental.pallas import tpu as pltpu

    mesh = core.create_tensorcore_mesh

    def create_tensorcore_mesh(
        axis_name: str, devices: Any = None, num_cores: int | None = None
    ) -> Any:
        if devices is None and num_cores is None:
            num_cores = 1
        return mesh(axis_name, devices, num_cores)

    core.create_tensorcore_mesh = pltpu.create_tensorcore_mesh = create_tensorcore_mesh
    keep_own_interpret_params()


def keep_own_interpret_params() -> None:
    """A kernel given its own `interpret=pltpu.InterpretParams(...)` runs with
    them: the forced mode would override them (it wins over `interpret=`).
    Wraps `pallas_call`, `core_map` and `kernel` wherever jax exports them."""
    from jax._src.pallas import core, helpers, pallas_call
    from jax.experimental.pallas import tpu as pltpu

    for function in (pallas_call.pallas_call, core.core_map, helpers.kernel):
        wrapper = _keeping_interpret(function, pltpu)
        for module in list(sys.modules.values()):
            for name, value in list(vars(module).items() if module else ()):
                if value is function and module.__name__.startswith("jax"):
                    setattr(module, name, wrapper)


def _keeping_interpret(function: Callable[..., Any], pltpu: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        own = kwargs.get("interpret")
        if not isinstance(own, pltpu.InterpretParams):
            return function(*args, **kwargs)
        with interpreting(own):
            result = function(*args, **kwargs)
        if not callable(result):
            return result

        def under_own(*args: Any, **kwargs: Any) -> Any:
            with interpreting(own):
                return result(*args, **kwargs)

        return under_own

    return functools.wraps(function)(call)


def _is_device_tpu(version: int | None = None, variant: str = "") -> bool:
    """`jtu.is_device_tpu` for a device of kind TPU_KIND."""
    if version is None:
        return True
    expected = f"v{version}{variant}"
    special = {"v5e": "v5 lite", "v6e": "v6 lite", "v7x": "TPU7x"}
    if expected == "v5p":
        return TPU_KIND.endswith("v5")
    return special.get(expected, expected) in TPU_KIND


@contextlib.contextmanager
def pretending_tpu() -> Iterator[None]:
    """jax's test utilities answer as on a TPU of kind TPU_KIND."""
    from jax._src import test_util as jtu

    with (
        mock.patch.object(jtu, "device_under_test", lambda: "tpu"),
        mock.patch.object(jtu, "get_tpu_version", lambda: TPU_GENERATION),
        mock.patch.object(jtu, "is_device_tpu", _is_device_tpu),
    ):
        yield


# Capture: `copyir.pallas.hook.capturing` where copyir has it, else a
# wrapper of Pallas' interpreter, installed once, that records each call's
# operands through a host callback into the innermost `capturing()` list.
_calls: list[list[Any]] = []
_installed: list[bool] = []


def _hook() -> Any:
    """copyir's capture hook, or None before it exists."""
    try:
        from copyir.pallas import hook
    except ImportError:
        return None
    return hook


@dataclasses.dataclass(frozen=True)
class Captured:
    name: str
    params: dict[str, Any]
    operands: list[Any]


def _recording_interpreter(interpreter: Callable[..., Any]) -> Callable[..., Any]:
    from jax.experimental import io_callback

    def interpret(*operands: Any, interpret_params: Any, **params: Any) -> Any:
        def record(*values: Any) -> None:
            if _calls:
                name = params.get("name") or params["jaxpr"].debug_info.func_name
                eqn_params = dict(params, interpret=interpret_params)
                _calls[-1].append(Captured(name, eqn_params, list(values)))

        io_callback(record, None, *operands, ordered=False)
        return interpreter(*operands, interpret_params=interpret_params, **params)

    return interpret


@contextlib.contextmanager
def capturing() -> Iterator[list[Any]]:
    """The `pallas_call`s executed inside, each in Pallas' interpret mode."""
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as module
    from jax.experimental.pallas import tpu as pltpu

    hook = _hook()
    if hook is not None:
        with hook.capturing() as calls:
            yield calls
        return
    if not _installed:
        module.interpret_pallas_call = _recording_interpreter(
            module.interpret_pallas_call
        )
        _installed.append(True)
    calls: list[Any] = []
    _calls.append(calls)
    try:
        with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()):
            yield calls
    finally:
        _calls.pop()


def interpreting(params: Any) -> contextlib.AbstractContextManager[Any]:
    """Pallas' interpret mode with a kernel's own parameters, captured."""
    from jax.experimental.pallas import tpu as pltpu

    hook = _hook()
    if hook is not None:
        return hook.forced(hook.Capture(pallas=params))
    return pltpu.force_tpu_interpret_mode(params)


@dataclasses.dataclass
class Case:
    """A test parameterisation or a doc cell, run by `run()`: (status, reason)."""

    test_id: str
    run: Callable[[], tuple[str, str, str]]


def reason_of(error: BaseException) -> str:
    """The error's type and first line; for an error raised in a host
    callback (Pallas' interpreter runs in them), the callback's own."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    if lines and "Traceback (most recent call last)" in lines[0]:
        lines = lines[-1:]
    if not lines:  # say where instead
        frame = traceback.extract_tb(error.__traceback__)[-1]
        lines = [f"(at {Path(frame.filename).name}:{frame.lineno})"]
    return f"{type(error).__name__}: {lines[0]}"[:300]


class _Result(unittest.TestResult):
    """A test's status and the first reason it gives."""

    status = "ok"
    reason = ""

    def _set(self, status: str, reason: str) -> None:
        if self.status == "ok":
            self.status, self.reason = status, reason

    def addError(self, test: Any, err: Any) -> None:
        self._set("failed", reason_of(err[1]))

    def addFailure(self, test: Any, err: Any) -> None:
        self._set("failed", reason_of(err[1]))

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        if err is not None:
            self._set("failed", reason_of(err[1]))

    def addSkip(self, test: Any, reason: str) -> None:
        self._set("skipped", reason[:300])

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        self._set("failed", f"expected failure: {reason_of(err[1])}")


def _run_test(test: unittest.TestCase) -> tuple[str, str, str]:
    """Run as on a TPU; a test skipped there runs again as on the CPU."""
    result = _Result()
    with pretending_tpu():
        test.run(result)
    if result.status != "skipped":
        return result.status, result.reason, "tpu"
    again = _Result()
    test.run(again)
    if again.status != "skipped":
        return again.status, again.reason, "cpu"
    if again.reason != result.reason:
        return "skipped", f"{result.reason} (as the CPU: {again.reason})", "tpu"
    return "skipped", result.reason, "tpu"


def _flatten(suite: unittest.TestSuite) -> Iterator[unittest.TestCase]:
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _flatten(test)
        else:
            yield test


def test_cases(source: str) -> list[Case]:
    """One case per test method and parameterisation, as jax's CI loads them."""
    from jax._src import test_util as jtu

    path = CORPUS / source
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    suite = jtu.JaxTestLoader().loadTestsFromModule(module)
    return [
        Case(f"{source}::{t.id().split('.', 1)[1]}", lambda t=t: _run_test(t))
        for t in _flatten(suite)
    ]


def doc_cells(source: str) -> list[Case]:
    """One case per `# %%` cell of an extracted doc page, run in order in
    one namespace (a failed cell leaves what it defined before failing).
    Snippets, which the page shows but does not run, are left out."""
    path = CORPUS / source
    namespace: dict[str, Any] = {"__name__": path.stem, "__file__": str(path)}
    lines = path.read_text().splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("# %% ")]

    def runner(first: int, last: int) -> Callable[[], tuple[str, str, str]]:
        def run() -> tuple[str, str, str]:
            # Blank lines before the cell keep the file's line numbers.
            text = "\n" * first + "".join(lines[first:last])
            try:
                exec(compile(text, str(path), "exec"), namespace)
            except Exception as error:
                return "failed", reason_of(error), "cpu"
            return "ok", "", "cpu"

        return run

    cases = []
    for first, last in zip(starts, [*starts[1:], len(lines)], strict=True):
        where = lines[first].removeprefix("# %% ").strip()
        if not where.startswith("[snippet]"):
            cases.append(
                Case(f"{source}::{where.rsplit('/', 1)[-1]}", runner(first, last))
            )
    return cases


def _shape_of(value: Any) -> tuple[tuple[int, ...], str]:
    return tuple(getattr(value, "shape", ())), str(getattr(value, "dtype", "?"))


def run_case(case: Case, source: str, on_unit: Callable[[Unit], Any] | None) -> Outcome:
    start = time.perf_counter()
    with capturing() as calls:
        status, reason, device = case.run()
    results = []
    for index, call in enumerate(calls):
        unit = Unit(case.test_id, index, call.name, call.params, call.operands)
        try:
            result = on_unit(unit) if on_unit else None
        except Exception as error:
            result = ("on_unit failed", reason_of(error))
        shapes = tuple(_shape_of(v) for v in call.operands)
        results.append(UnitResult(case.test_id, index, call.name, shapes, result))
    seconds = time.perf_counter() - start
    return Outcome(
        case.test_id, source, status, reason, device, seconds, tuple(results)
    )


def describe(unit: Unit) -> dict[str, Any]:
    """An example `--on-unit`: the call's grid, its kernel's equation count
    and each operand's sum, small and picklable."""
    import numpy as np

    return {
        "grid": tuple(unit.params["grid_mapping"].grid),
        "equations": len(unit.params["jaxpr"].eqns),
        "sums": tuple(float(np.sum(np.asarray(v, np.float64))) for v in unit.operands),
    }


def resolve(name: str | None) -> Callable[[Unit], Any] | None:
    """`module:function`, importable with benchmarks/ on the path."""
    if not name:
        return None
    sys.path.insert(0, str(HERE.parent))
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def worker(job: str, out: Path, skip: set[str], replay: set[str], on_unit: str) -> None:
    """Run a job's cases, appending ("cases", ids), ("start", id) and
    ("done", Outcome) records to `out`. Cases in `skip` do not run; doc
    cells in `replay` run without being recorded (their names are needed)."""
    match = SHARD.match(job)
    assert match
    source = match["path"]
    prepare_worker(source)
    k, n = int(match["k"] or 0), int(match["n"] or 1)
    is_doc = source.startswith("docs/")
    cases = doc_cells(source) if is_doc else test_cases(source)[k::n]
    function = resolve(on_unit)
    with out.open("ab") as records:

        def write(record: tuple[Any, ...]) -> None:
            pickle.dump(record, records)
            records.flush()

        write(("cases", [c.test_id for c in cases]))
        for case in cases:
            if case.test_id in replay:
                with capturing():
                    case.run()
            elif case.test_id not in skip:
                write(("start", case.test_id))
                write(("done", run_case(case, source, function)))
        write(("end",))


# --- The parent: jobs, timeouts, the budget ---


def _read_records(path: Path) -> list[tuple[Any, ...]]:
    records: list[tuple[Any, ...]] = []
    if not path.exists():  # stopped before it started
        return records
    with path.open("rb") as f:
        while True:
            try:
                records.append(pickle.load(f))
            except (EOFError, pickle.UnpicklingError):
                return records


def run_job(
    job: str,
    *,
    test_timeout: float,
    deadline: float,
    source_budget: float = float("inf"),
    on_unit: str = "",
) -> list[Outcome]:
    """All cases of one job, restarting its worker after a timeout or a crash."""
    source = job.split("@")[0]
    if time.monotonic() > deadline:
        return [Outcome(job, source, "not run", "budget (not loaded)")]
    deadline, overall = min(deadline, time.monotonic() + source_budget), deadline
    done: dict[str, Outcome] = {}
    cases: list[str] | None = None
    while cases is None or len(done) < len(cases):
        before = len(done)
        with tempfile.TemporaryDirectory() as tmp:
            out, log = Path(tmp) / "records", Path(tmp) / "log"
            skip = set(done)
            replay = {t for t, o in done.items() if o.status == "ok"}
            stopped = _run_worker(
                job, out, log, skip, replay, on_unit, test_timeout, deadline
            )
            records = _read_records(out)
            current = None
            for record in records:
                if record[0] == "cases":
                    cases = record[1]
                elif record[0] == "start":
                    current = record[1]
                elif record[0] == "done":
                    done[record[1].test_id] = record[1]
                    current = None
            if records and records[-1][0] == "end":
                continue
            if cases is None:
                reason = stopped or f"crashed: {_last_line(log)}"
                return [Outcome(job, source, "crashed", f"cannot load: {reason}")]
            if current is not None and stopped == "timeout":
                reason = f"over {test_timeout:g} s"
                done[current] = Outcome(current, source, "timeout", reason)
            elif current is not None and not stopped:
                reason = f"worker died: {_last_line(log)}"
                done[current] = Outcome(current, source, "crashed", reason)
            if stopped == "budget" or len(done) == before:
                # Out of time, or a worker that dies between cases.
                status = "not run" if stopped == "budget" else "crashed"
                reason = f"worker died: {_last_line(log)}"
                if stopped == "budget":
                    late = time.monotonic() > overall
                    reason = "budget" if late else "source budget"
                for test_id in cases:
                    done.setdefault(test_id, Outcome(test_id, source, status, reason))
    assert cases is not None
    return [done[t] for t in cases]


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line]
    return lines[-1][:300] if lines else "no output"


def _run_worker(
    job: str,
    out: Path,
    log: Path,
    skip: set[str],
    replay: set[str],
    on_unit: str,
    test_timeout: float,
    deadline: float,
) -> str:
    """Run one worker to its end (""), or stop it ("timeout", "budget"): a
    case, or loading the source, may take `test_timeout` seconds."""
    args = Path(out.parent / "args")
    args.write_bytes(pickle.dumps((job, skip, replay, on_unit)))
    # Imported as `collect`, whoever runs it: the records unpickle anywhere
    # this directory is on the path.
    command = [sys.executable, "-c", "import collect; collect.main()"]
    command += ["--worker", str(args), str(out)]
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=path)
    with log.open("wb") as err:
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            start_new_session=True,
        )
        started, current = time.monotonic(), None
        while process.poll() is None:
            time.sleep(0.5)
            now = time.monotonic()
            latest = _latest_start(out)
            if latest != current:
                started, current = now, latest
            if now > deadline or now - started > test_timeout:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return "budget" if now > deadline else "timeout"
    return ""


def _latest_start(out: Path) -> str | None:
    latest = None
    for record in _read_records(out):
        if record[0] == "start":
            latest = record[1]
    return latest


def collect(
    selected: Sequence[str] | None = None,
    *,
    jobs: int = 1,
    test_timeout: float = 120.0,
    budget: float = 3600.0,
    source_budget: float = 600.0,
    on_unit: str = "",
) -> list[Outcome]:
    """Every case of the selected sources (all by default), with its units:
    `budget` seconds in all, `source_budget` for each shard of a source."""
    deadline = time.monotonic() + budget
    work = []
    for source in selected or sources():
        shards = 1 if source.startswith("docs/") else jobs
        work += [
            source if shards == 1 else f"{source}@{k}/{shards}" for k in range(shards)
        ]

    def run(job: str) -> list[Outcome]:
        return run_job(
            job,
            test_timeout=test_timeout,
            deadline=deadline,
            source_budget=source_budget,
            on_unit=on_unit,
        )

    with ThreadPoolExecutor(jobs) as pool:
        return [o for outcomes in pool.map(run, work) for o in outcomes]


def summary(outcomes: Sequence[Outcome], top: int = 15) -> str:
    """The figures and the most frequent reasons a case does not run."""
    files = {o.source for o in outcomes}
    statuses = collections.Counter(o.status for o in outcomes)
    units = sum(len(o.units) for o in outcomes)
    with_units = sum(1 for o in outcomes if o.units)
    lines = [
        f"sources: {len(files)} ({sum(1 for f in files if f.startswith('tests/'))} "
        f"test files), cases: {len(outcomes)}",
        "status: " + ", ".join(f"{s} {n}" for s, n in statuses.most_common()),
        f"pallas_calls captured: {units}, from {with_units} cases",
        "",
        "| cases | status | reason |",
        "| ---: | --- | --- |",
    ]
    reasons = collections.Counter(
        (o.status, re.sub(r"\d+", "N", o.reason)[:120])
        for o in outcomes
        if o.status != "ok"
    )
    for (status, reason), n in reasons.most_common(top):
        lines.append(f"| {n} | {status} | {reason.replace('|', '/')} |")
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        job, skip, replay, on_unit = pickle.loads(Path(sys.argv[2]).read_bytes())
        worker(job, Path(sys.argv[3]), skip, replay, on_unit)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", help="paths relative to " + TAG)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--test-timeout", type=float, default=120.0)
    parser.add_argument("--budget", type=float, default=3600.0)
    parser.add_argument("--source-budget", type=float, default=600.0)
    parser.add_argument("--on-unit", default="", help="module:function")
    parser.add_argument("--save", type=Path, help="pickle the outcomes here")
    args = parser.parse_args()
    start = time.monotonic()
    outcomes = collect(
        args.sources or None,
        jobs=args.jobs,
        test_timeout=args.test_timeout,
        budget=args.budget,
        source_budget=args.source_budget,
        on_unit=args.on_unit,
    )
    if args.save:
        args.save.write_bytes(pickle.dumps(outcomes))
    print(summary(outcomes))
    print(f"\nwall time: {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    # Run as the module `collect`, as the workers are: every record is then a
    # `collect.Outcome`, and a saved file unpickles wherever collect imports.
    sys.path.insert(0, str(HERE))
    import collect

    collect.main()
