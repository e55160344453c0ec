"""The documentation holds together: every relative link of the README,
ARCHITECTURE.md and docs/ reaches a file (and its heading, for an anchor),
and the stream reference documents every op of the dma dialect."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

import copyir
from copyir.dialects.dma import Dma

PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted(ROOT.glob("docs/*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def links(page) -> list[str]:
    """The link targets of a page, outside code."""
    return LINK.findall(CODE.sub("", page.read_text()))


def anchors(page) -> set[str]:
    """GitHub's anchors: each heading lowercased, punctuation dropped, spaces
    as dashes; and explicit `<a id=...>`."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    found = set(re.findall(r'<a id="([^"]+)">', text))
    for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE):
        found.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: {target}"


def test_the_stream_reference_documents_every_dma_op():
    reference = (ROOT / "docs" / "stream.md").read_text()
    for op in Dma.operations:
        assert f"`{op.name}`" in reference, op.name


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "examples" / "invalid").glob("*/*.*")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_the_error_catalogue_lists_each_lowering_and_runtime_example(path):
    catalogue = (ROOT / "docs" / "errors.md").read_text()
    where = f"../examples/invalid/{path.parent.name}/{path.name}"
    assert f"| [`{path.name}`]({where}) | `" in catalogue


def lowered_lines(example: str) -> set[str]:
    """The lines of `copyir lower EXAMPLE`, stripped."""
    module = copyir.parse((ROOT / example).read_text(), filename=example)
    text = copyir.to_text(copyir.lower(module), "dma")
    return {line.strip() for line in text.splitlines()}


@pytest.mark.parametrize("page", ["README.md", "docs/stream.md"])
def test_the_stream_shown_is_what_copyir_lower_prints(page):
    """Each stream line shown is in `copyir lower`'s output for the example
    its origin comment (or its block's command) names."""
    outputs: dict[str, set[str]] = {}
    for block in re.findall(r"```\n(.*?)```", (ROOT / page).read_text(), re.DOTALL):
        command = re.match(r"\$ copyir lower (\S+)", block)
        for line in block.splitlines():
            shown = line.strip()
            origin = re.search(r"// (examples/\S+?):\d+:\d+", shown)
            example = origin[1] if origin else command and command[1]
            if not shown.startswith("dma.") or not example:
                continue
            if example not in outputs:
                outputs[example] = lowered_lines(example)
            assert shown in outputs[example], (page, shown)


SOURCE_PATH = re.compile(r"`((?:copyir|passes|backends)/[\w/.]*\w/?)`")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_source_path_named_exists(page):
    """A module or package named in backticks (`copyir/validate/`) is there:
    a split or a move updates the text."""
    for path in SOURCE_PATH.findall(page.read_text()):
        assert (ROOT / path).exists(), f"{page.name}: {path}"


def test_the_binary_form_is_described_as_written():
    """docs/stream.md gives the `.npz` version the code writes and the
    instruction table's columns in the schema's order."""
    from copyir.dma_schema import columns
    from copyir.stream.npz import FORMAT_VERSION

    text = (ROOT / "docs" / "stream.md").read_text()
    binary = text[text.index("## The binary form") :]
    assert f"`version` is `{FORMAT_VERSION}`" in binary
    table = binary[binary.index("- `instructions`") :]
    names = [c.name for c in columns()]
    named = [w for w in re.findall(r"`(\w+)`", table) if w in names]
    assert list(dict.fromkeys(named)) == names
