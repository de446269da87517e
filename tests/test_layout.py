"""The layout shows the architecture: the product (fastdeploy_mtp/*.py, the
op sources) imports nothing of the harness (fastdeploy_mtp/harness/: the
simulator, models, oracle, random states) or the benchmarks
(fastdeploy_mtp/bench/), at the top of a module or inside a function. Only the
command line (__main__.py) reaches all three."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fastdeploy_mtp"
APART = ("fastdeploy_mtp.harness", "fastdeploy_mtp.bench")


def imported_modules(path: Path, package: Path = PACKAGE) -> set:
    """Every module `path` (a file of `package`) imports, as absolute dotted names."""
    here = ["fastdeploy_mtp", *path.parent.relative_to(package).parts]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
    return found


def product_modules() -> list:
    return sorted(p for p in PACKAGE.glob("*.py") if p.name != "__main__.py")


def test_the_product_is_the_package_s_top_level():
    names = {p.stem for p in product_modules()}
    assert {"ops", "proposer", "captured", "signature", "registration", "buffers",
            "slots", "reference"} <= names
    assert not names & {"simulate", "states", "tiny_model", "draft_check", "bench"}


@pytest.mark.parametrize("path", product_modules(), ids=lambda p: p.name)
def test_a_product_module_imports_nothing_of_the_harness_or_the_benchmarks(path):
    bad = sorted(m for m in imported_modules(path) if m.startswith(APART))
    assert not bad, f"{path.name} imports {bad}"


def test_the_import_scan_sees_relative_and_nested_imports(tmp_path):
    """The scan itself: relative imports inside a function, from the top level
    and from a subpackage, are seen."""
    package = tmp_path / "fastdeploy_mtp"
    (package / "harness").mkdir(parents=True)
    top, sub = package / "probe.py", package / "harness" / "probe.py"
    top.write_text("def f():\n    from .harness import states\n    from .bench.cpu import main\n")
    sub.write_text("from .. import ops\nfrom .tiny_model import TinyDecoder\n")
    assert {"fastdeploy_mtp.harness.states", "fastdeploy_mtp.bench.cpu"} <= imported_modules(
        top, package)
    assert {"fastdeploy_mtp.ops", "fastdeploy_mtp.harness.tiny_model"} <= imported_modules(
        sub, package)
