"""The import graph of ``streamer`` (``streamer.sources`` and ``streamer.transforms`` included):
no cycle, no upward edge.

Every import counts, the ones inside functions too (``TYPE_CHECKING`` blocks excluded):
a function-level import defers the cost of loading a module, but it is a dependency all
the same, and a cycle hidden inside a function still means two modules cannot be
understood one without the other.

The packages are layered (:data:`LAYERS`, lowest first): a module imports from its own
package or from a lower layer, never from a higher one, and never from another package
of its own layer (``read`` and ``write`` stay independent of each other). The order is
the architecture: the format (``table``), then the index, then reading and writing, the
services, the sources, the pipeline that runs them all, and the command line.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
#: Folder of the checkout -> the package its files are installed as. ``sources/`` and
#: ``transforms/`` are reached from ``streamer/`` through links (``streamer/sources`` ->
#: ``../sources``): each file is one module, named as installed, and scanned once.
PACKAGES = {"streamer": "streamer", "sources": "streamer.sources", "transforms": "streamer.transforms"}
#: Names that must never be imported: the folders' files are modules of ``streamer`` only
#: (imported as ``sources.x`` too, a file would be two module objects with two states).
TOP_LEVEL_FOLDERS = ("sources", "transforms")


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = [*PACKAGES[rel.parts[0]].split("."), *rel.parts[1:]]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def project_files() -> dict[str, Path]:
    """Module name -> file, every ``.py`` of the three folders once (links not followed)."""
    out: dict[str, Path] = {}
    for folder in PACKAGES:
        for path in sorted((REPO / folder).rglob("*.py")):
            if any((REPO / d).is_symlink() for d in path.relative_to(REPO).parents):
                continue  # streamer/sources/...: the same file as sources/...
            out[_module_name(path)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module, module: str, is_pkg: bool, modules: set[str]) -> set[str]:
    """Every module this one imports, at any depth (``TYPE_CHECKING`` blocks excluded).
    ``from pkg import sub`` needs ``pkg.sub`` only (a package's ``__init__`` runs first
    for any submodule: that edge is implicit and not a cycle); ``from pkg import name``
    needs ``pkg``."""
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node)
                   for n in ast.walk(node) if n is not node}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in modules else target)
    return out


@functools.cache
def import_graph() -> dict[str, set[str]]:
    files = project_files()
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        deps = {d for d in _imports(tree, name, path.name == "__init__.py", set(files))
                if d in files}
        graph[name] = {d for d in deps if d != name}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


#: The layers, lowest first. A package is ``streamer.<name>`` (a subpackage or a
#: top-level module).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("streamer", "streamer.errors", "streamer.defaults", "streamer.resources", "streamer.spark_daemon"),
    ("streamer.fs_s3",),
    ("streamer.fs", "streamer.jvm", "streamer.data", "streamer.faults", "streamer.viz"),
    ("streamer.table",),  # the Hudi format: bytes, names, timeline, properties, identity
    ("streamer.config",),  # the YAML models (they name the table's identity)
    ("streamer.index",),
    ("streamer.integrity",),  # damage checks: files, blocks, metadata and the indexes
    ("streamer.read", "streamer.write"),
    ("streamer.services", "streamer.catalog", "streamer.spark"),
    ("streamer.sources", "streamer.transforms"),
    ("streamer.pipeline",),
    ("streamer.observe",),
    ("streamer.local",),
    ("streamer.cli",),
    ("streamer.__main__",),
)


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def layer_of(package: str) -> int:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(f"package {package} has no layer in LAYERS: add it where it belongs")


def wrong_edges(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, deps in sorted(graph.items()):
        mine = package_of(module)
        for dep in sorted(deps):
            theirs = package_of(dep)
            if theirs == mine:
                continue
            if layer_of(theirs) > layer_of(mine):
                out.append(f"{module} -> {dep} (up: {mine} is below {theirs})")
            elif layer_of(theirs) == layer_of(mine):
                out.append(f"{module} -> {dep} ({mine} and {theirs} share a layer and stay independent)")
    return out


def test_every_package_has_a_layer():
    packages = {package_of(m) for m in import_graph()}
    missing = [p for p in sorted(packages) if not any(p in layer for layer in LAYERS)]
    assert not missing, f"packages without a layer: {missing}"


def test_no_import_goes_up_a_layer():
    wrong = wrong_edges(import_graph())
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_function_level_imports_are_counted():
    """The graph sees an import inside a function (the cycles hidden there are cycles)."""
    tree = ast.parse("def f():\n    from streamer.cli import main\n")
    assert _imports(tree, "streamer.table.x", False, {"streamer.cli"}) == {"streamer.cli"}



def _raw_imports(path: Path, module: str) -> set[str]:
    """Every module ``path`` names in an import, project or not, at any depth."""
    tree = ast.parse(path.read_text(), str(path))
    return _imports(tree, module, path.name == "__init__.py", set())


def test_project_files_are_scanned_once_under_their_installed_names():
    files = project_files()
    assert len({p.resolve() for p in files.values()}) == len(files)
    assert "streamer.sources.base" in files and "streamer.transforms" in files
    assert not [m for m in files if m.split(".")[0] != "streamer"]


def test_nothing_imports_the_folders_as_top_level_packages():
    """``sources``/``transforms`` are installed only as ``streamer.sources``/``streamer.transforms``:
    the product, the tests and the benchmarks import them by that name alone."""
    scanned = list(project_files().items())
    scanned += [(".".join(p.relative_to(REPO).with_suffix("").parts), p)
                for folder in ("tests", "benchmarks") for p in sorted((REPO / folder).rglob("*.py"))]
    wrong = [f"{p.relative_to(REPO)}: {dep}" for m, p in scanned for dep in sorted(_raw_imports(p, m))
             if dep.split(".")[0] in TOP_LEVEL_FOLDERS]
    assert not wrong, "imports of a top-level sources/transforms:\n" + "\n".join(wrong)



def test_the_product_never_imports_testcontainers():
    """testcontainers is a test-only extra: an installed ``streamer`` never needs it."""
    wrong = [f"{p.relative_to(REPO)}: {dep}" for m, p in project_files().items()
             for dep in sorted(_raw_imports(p, m)) if dep.split(".")[0] == "testcontainers"]
    assert not wrong, "\n".join(wrong)
