"""Vendor jax's Pallas TPU tests, ops and doc kernels at one tag.

    python benchmarks/corpus/vendor.py GIT_DIR [--tag jax-v0.10.2]

GIT_DIR is a git directory of github.com/jax-ml/jax (a bare mirror is
enough). Files are copied byte for byte from the tag; the code cells of
`docs/pallas/tpu/*.md` become one `.py` per page, in jupytext's percent
format (a `# %%` line per cell, naming the cell's line in the page), so
that the collector can run them cell by cell. Run once per tag; the result
is committed, and README.md says what it holds.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Test files beyond `tpu_pallas_*_test.py`: the main Pallas TPU test file
#: (which that pattern misses) and the tests that drive the kernels of
#: `jax/experimental/pallas/ops/tpu`.
EXTRA_TESTS = (
    "tests/pallas/tpu_pallas_test.py",
    "tests/pallas/tpu_all_gather_test.py",
    "tests/pallas/tpu_gmm_test.py",
    "tests/pallas/tpu_paged_attention_kernel_test.py",
    "tests/pallas/tpu_ragged_paged_attention_test.py",
    "tests/pallas/tpu_splash_attention_kernel_test.py",
)

#: Test helpers the tests import that jax's wheel leaves out.
SUPPORT = (
    "jax/_src/pallas/pallas_test_util.py",
    "jax/_src/hypothesis_test_util.py",
)

LICENSE_HEADER = """\
# Copyright {year} The JAX Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     https://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""

CELL_FENCE = re.compile(r"^```\{code-cell\}")
PYTHON_FENCE = re.compile(r"^```python\s*$")


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def blob(git_dir: Path, tag: str, path: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{tag}:{path}"],
        check=True,
        capture_output=True,
    ).stdout


def code_cells(markdown: str) -> list[tuple[int, str, bool]]:
    """(line, code, executed) for each code block of a MyST page, in order.

    Executed cells are ```{code-cell}``` blocks, their options (a `---`
    YAML block or `:key: value` lines) dropped; ```python``` blocks are
    snippets the page shows but does not run.
    """
    lines = markdown.splitlines()
    cells: list[tuple[int, str, bool]] = []
    i = 0
    while i < len(lines):
        executed = bool(CELL_FENCE.match(lines[i]))
        if not executed and not PYTHON_FENCE.match(lines[i]):
            i += 1
            continue
        start = i + 1
        j = start
        if executed and j < len(lines) and lines[j] == "---":
            j = lines.index("---", j + 1) + 1
        while executed and j < len(lines) and lines[j].startswith(":"):
            j += 1
        end = j
        while not lines[end].startswith("```"):
            end += 1
        cells.append((start, "\n".join(lines[j:end]), executed))
        i = end + 1
    return cells


def as_python(code: str) -> str:
    """Comment out IPython magics and shell escapes, which Python cannot run."""
    return "\n".join(
        f"# (IPython) {line}" if line.lstrip().startswith(("%", "!")) else line
        for line in code.splitlines()
    )


def extract_page(markdown: str, source: str, tag: str, commit: str, year: str) -> str:
    """The page's code as one Python file, one `# %%` cell per block.

    A page with executed cells keeps its snippets as comments (they are
    fragments); a page with snippets only keeps them as code.
    """
    cells = code_cells(markdown)
    has_executed = any(executed for _, _, executed in cells)
    out = [
        LICENSE_HEADER.format(year=year),
        f"# The code cells of {source} in jax at {tag} ({commit}), in order,",
        "# extracted by benchmarks/corpus/vendor.py. Each `# %%` line starts a",
        "# cell and names its line in the page; IPython magics are commented out.",
    ]
    if has_executed:
        out.append("# ```python snippets, which the page does not run, are comments.")
    for line, code, executed in cells:
        if executed or not has_executed:
            out += ["", f"# %% {source}:{line}", as_python(code)]
        else:
            body = "\n".join(f"# {c}".rstrip() for c in code.splitlines())
            out += ["", f"# %% [snippet] {source}:{line}", body]
    return "\n".join(out) + "\n"


def vendor(git_dir: Path, tag: str, dest: Path) -> None:
    commit = git(git_dir, "rev-parse", f"{tag}^{{commit}}").strip()
    names = git(git_dir, "ls-tree", "-r", "--name-only", tag).splitlines()
    tests = [
        n for n in names if re.fullmatch(r"tests/pallas/tpu_pallas_.*_test\.py", n)
    ]
    ops = [
        n
        for n in names
        if n.startswith("jax/experimental/pallas/ops/tpu/") and n.endswith(".py")
    ]
    for path in ["LICENSE", *tests, *EXTRA_TESTS, *ops, *SUPPORT]:
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob(git_dir, tag, path))
    pages = [n for n in names if re.fullmatch(r"docs/pallas/tpu/[^/]*\.md", n)]
    for page in pages:
        first = git(
            git_dir,
            "log",
            "--diff-filter=A",
            "--format=%ad",
            "--date=format:%Y",
            tag,
            "--",
            page,
        )
        year = first.split()[-1] if first.split() else commit_year(git_dir, commit)
        text = blob(git_dir, tag, page).decode()
        target = dest / Path(page).with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(extract_page(text, page, tag, commit, year))
    n_tests = len(tests) + len(EXTRA_TESTS)
    counts = f"{n_tests} tests, {len(ops)} ops, {len(pages)} pages"
    print(f"{tag} = {commit}: {counts}")


def commit_year(git_dir: Path, commit: str) -> str:
    return git(git_dir, "log", "-1", "--format=%ad", "--date=format:%Y", commit).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", type=Path)
    parser.add_argument("--tag", default="jax-v0.10.2")
    args = parser.parse_args()
    vendor(args.git_dir, args.tag, HERE / args.tag)


if __name__ == "__main__":
    main()
