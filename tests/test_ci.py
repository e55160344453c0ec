"""CI itself: what `.ci/run` checks, and limits that must hold on a busy machine."""

from __future__ import annotations

from conftest import ROOT


def test_ci_runs_ruff_check_and_format_after_installing():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    install = lines.index('pip install --quiet -e ".[dev]"')
    assert lines.index("ruff check .") > install
    assert lines.index("ruff format --check .") > install
    assert lines.index("pytest") > lines.index("ruff format --check .")


def test_ci_runs_pyright_before_the_tests():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert lines.index("ruff format --check .") < lines.index("pyright")
    assert lines.index("pyright") < lines.index("pytest")


def test_pyright_sees_the_package_dir_mapping():
    """pyright cannot follow the editable install's import hook: its extra
    path spells each mapped package (`copyir.passes` -> `passes/`) as a
    link to the directory pyproject maps it to, and `copyir` itself."""
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    (extra,) = pyproject["pyright"]["extraPaths"]
    mirror = ROOT / extra / "copyir"
    assert (mirror / "__init__.py").resolve() == ROOT / "copyir" / "__init__.py"
    for name, path in pyproject["setuptools"]["package-dir"].items():
        assert (mirror / name.removeprefix("copyir.")).resolve() == ROOT / path


def test_the_fuzz_time_limit_only_catches_hangs():
    import test_fuzz

    assert test_fuzz.TIME_LIMIT >= 10
    assert (
        "The limit only catches hangs" in (ROOT / "tests" / "test_fuzz.py").read_text()
    )


def test_every_package_of_the_source_tree_is_installed():
    """An editable install finds a package pyproject does not list; a wheel
    leaves it out, so a new subpackage must be named there."""
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
        "setuptools"
    ]
    homes = {"copyir": ROOT / "copyir"}
    homes |= {name: ROOT / path for name, path in setuptools["package-dir"].items()}
    found = set()
    for name, home in homes.items():
        for init in home.rglob("__init__.py"):
            parts = init.parent.relative_to(home).parts
            found.add(".".join((name, *parts)))
    assert found == set(setuptools["packages"])


def test_pytest_runs_on_every_core_and_fails_on_warnings():
    """The README's `pytest` takes its options from pyproject: workers from
    pytest-xdist (a dev extra, so that `.ci/run` installs it), and no warning
    that a test does not expect."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    dev = project["project"]["optional-dependencies"]["dev"]
    assert any(d.startswith("pytest-xdist") for d in dev)
    options = project["tool"]["pytest"]["ini_options"]
    assert "-n auto" in options["addopts"]
    assert "--strict-markers" in options["addopts"]
    assert options["filterwarnings"][0] == "error"
