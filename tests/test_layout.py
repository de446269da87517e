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


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = ["fastdeploy_mtp", *path.relative_to(package).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE, apart=("harness", "bench")) -> dict:
    """{module: the modules of `package` it imports} over the product (every
    module but those of the folders `apart`, the harness's and the
    benchmarks', and __main__), imports inside functions included; ``from
    pkg import name`` is an import of pkg.name where that is a module, else
    of pkg."""
    paths = [p for p in package.rglob("*.py")
             if p.name != "__main__.py"
             and not p.relative_to(package).parts[0] in apart]
    names = {_module_name(p, package): p for p in paths}
    graph = {}
    for name, path in names.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                for a in node.names:
                    edges.add(f"{module}.{a.name}" if f"{module}.{a.name}" in names else module)
        graph[name] = {m for m in edges if m in names and m != name}
    return graph


def first_cycle(graph: dict):
    """One cycle of `graph` as a list of its modules, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_no_product_modules_import_one_another_in_a_cycle():
    """One job a module: the ops' public face (ops.py) imports the typed
    wrappers (forms.py), which import the library's loading and calls
    (_library.py), and nothing imports back, at the top or inside a function."""
    cycle = first_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_no_modules_of_the_harness_or_the_benchmarks_import_one_another_in_a_cycle():
    """The same over the whole package: the verdict tables share their rows'
    workload and printing through a module of their own (harness/tables.py)
    rather than one importing the other back."""
    cycle = first_cycle(import_graph(apart=()))
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_scan_finds_a_cycle_through_a_function_s_import(tmp_path):
    package = tmp_path / "fastdeploy_mtp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def f():\n    from .a import g\n")
    (package / "c.py").write_text("from . import a\n")
    assert first_cycle(import_graph(package)) in (["fastdeploy_mtp.a", "fastdeploy_mtp.b",
                                                   "fastdeploy_mtp.a"],
                                                  ["fastdeploy_mtp.b", "fastdeploy_mtp.a",
                                                   "fastdeploy_mtp.b"])
    (package / "b.py").write_text("def f():\n    from . import c\n")
    assert first_cycle(import_graph(package)) is not None
    (package / "b.py").write_text("")
    assert first_cycle(import_graph(package)) is None


def _package(root: Path, files: dict) -> Path:
    """A fake fastdeploy_mtp under `root`, of `files` ({relative path: source})."""
    package = root / "fastdeploy_mtp"
    for rel, text in {"__init__.py": "", **files}.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text)
    return package


@pytest.mark.parametrize("files,cycle", [
    ({"plugin/detect.py": "from .patches import patch\n",
      "plugin/patches/patch.py": "def f():\n    from ..detect import signatures\n"},
     ["fastdeploy_mtp.plugin.detect", "fastdeploy_mtp.plugin.patches.patch"]),
    ({"ops.py": "from .plugin.patches.patch import Patch\n",
      "plugin/patches/patch.py": "from ... import ops\n"},
     ["fastdeploy_mtp.ops", "fastdeploy_mtp.plugin.patches.patch"]),
    ({"plugin/__init__.py": "from .detect import choose\n",
      "plugin/detect.py": "from . import FORM_VARIABLE\n"},
     ["fastdeploy_mtp.plugin", "fastdeploy_mtp.plugin.detect"]),
], ids=["from ..module, two levels down", "from ... import module, the package's top",
        "through a package's __init__"])
def test_the_cycle_scan_finds_a_cycle_across_levels_and_through_a_package(tmp_path, files,
                                                                            cycle):
    """Each relative import is resolved from its own module's package (a
    package's __init__ is in that package itself), however many levels up."""
    package = _package(tmp_path, files)
    found = first_cycle(import_graph(package))
    assert found is not None and found[0] == found[-1] and sorted(found[1:]) == cycle, found
    (package / next(iter(files))).write_text("")  # one side of it, emptied: no cycle
    assert first_cycle(import_graph(package)) is None
