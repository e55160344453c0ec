"""Start-up time of a short command against its floor, in one run.

    python benchmarks/startup.py [--runs N]

Times `copyir verify examples/roundtrip.cpy` and, as the baseline, `python
-c "import xdsl.ir, lark, numpy"` (the libraries any copyir command loads),
each as a fresh process, alternating, N times; prints the medians and their
ratio. Target: a ratio of at most 1.5. A third line times the import of
xDSL's IR definition machinery (`xdsl.dialects.builtin`, `xdsl.irdl`) on
top of the baseline: copyir's dialects are built on it, so it is the floor
of any command that reads a program.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "copyir verify examples/roundtrip.cpy": [
        sys.executable,
        "-m",
        "copyir",
        "verify",
        str(ROOT / "examples" / "roundtrip.cpy"),
    ],
    "import xdsl.ir, lark, numpy": [
        sys.executable,
        "-c",
        "import xdsl.ir, lark, numpy",
    ],
    "... and xdsl.dialects.builtin, xdsl.irdl": [
        sys.executable,
        "-c",
        "import xdsl.ir, lark, numpy, xdsl.dialects.builtin, xdsl.irdl",
    ],
}


def elapsed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    runs = parser.parse_args().runs
    for command in COMMANDS.values():  # warm the caches (.pyc, grammar)
        elapsed(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, command in COMMANDS.items():
            times[name].append(elapsed(command))
    medians = {name: statistics.median(t) for name, t in times.items()}
    width = max(map(len, medians))
    for name, median in medians.items():
        print(f"{name:<{width}}  {median * 1000:7.1f} ms (median of {runs})")
    verify, baseline, floor = medians.values()
    print(f"ratio verify / baseline: {verify / baseline:.2f} (target <= 1.5)")
    print(f"ratio floor / baseline:  {floor / baseline:.2f}")


if __name__ == "__main__":
    main()
