"""The import graph follows the layers README.md's Architecture section draws.

Data flows one way: a library module imports only modules of its own layer or
below, no two modules import each other (directly or round a loop), and
nothing but the commands imports the command-line runner. Read from the source
(every `import` and `from ... import`, function-level ones included), so the
check needs no TensorFlow.
"""

import ast
import pathlib

import pytest

from support import REPO_ROOT

# Bottom to top: a module may import its own layer and those below it.
LAYERS = [
    ("official_bert.errors", "official_bert.settings", "official_bert.configs",
     "official_bert.run_settings",
     "official_bert.progress", "official_bert.interruption", "official_bert.resources",
     "data_prep.configs"),
    ("official_bert.io", "official_bert.file_sets", "official_bert.outputs", "official_bert.inputs",
     "official_bert.run_directory.layout", "official_bert.run_directory.lock",
     "official_bert.metrics"),
    ("official_bert.text", "official_bert.modeling", "data_prep"),
    ("official_bert.checkpoints", "official_bert.model_files", "official_bert.run_directory",
     "official_bert.google_export", "official_bert.vocab_extension", "official_bert.training"),
    ("official_bert.tasks", "official_bert.serving"),
    ("official_bert.commands", "official_bert.commands.cli_flags", "official_bert.commands.app",
     "official_bert.commands.cli"),
]


def layer_of(module: str) -> int:
    """The layer of a module: that of the longest prefix listed in `LAYERS`."""
    best, depth = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > depth:
                best, depth = index, len(prefix)
    if best is None:
        raise AssertionError(f"{module} is in no layer of tests/test_layers.py's LAYERS")
    return best


def library_modules() -> dict:
    """Module name -> its file, for every module of official_bert/ and data_prep/."""
    modules = {}
    for package in ("official_bert", "data_prep"):
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def imports_of(module: str, path: pathlib.Path, known: dict) -> set:
    """The library modules `module` imports (`from a import b` counts as a.b
    when a.b is a module, else as a)."""
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                     for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


MODULES = library_modules()
GRAPH = {m: imports_of(m, p, MODULES) for m, p in MODULES.items()}
# The package faces: `official_bert/__init__.py` loads its public names lazily
# (by name, not by import), and a package's __init__ belongs to its package.
FACES = {"official_bert", "data_prep"}


@pytest.mark.parametrize("module", sorted(set(MODULES) - FACES))
def test_no_import_runs_up_a_layer(module):
    upward = sorted(name for name in GRAPH[module] - FACES
                    if layer_of(name) > layer_of(module))
    assert not upward, f"{module} (layer {layer_of(module)}) imports higher layers: {upward}"


def test_no_circle_of_imports():
    """Depth-first search for a back edge; the first loop found is named."""
    state, stack = {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for name in sorted(GRAPH[module]):
            if state.get(name) == "open":
                raise AssertionError("import circle: " + " -> ".join(
                    stack[stack.index(name):] + [name]))
            if name not in state:
                visit(name)
        stack.pop()
        state[module] = "done"

    for module in sorted(MODULES):
        if module not in state:
            visit(module)


def test_the_check_sees_an_upward_import(tmp_path):
    """The checker itself: a module of io's layer importing a command (at
    function level, relatively) is read as doing so, and flagged."""
    path = tmp_path / "io.py"
    path.write_text("def f():\n    from .commands import classify\n")
    found = imports_of("official_bert.io", path, MODULES)
    assert found == {"official_bert.commands.classify"}
    assert layer_of("official_bert.commands.classify") > layer_of("official_bert.io")


def print_calls(path: pathlib.Path) -> list:
    """The lines of `path` that call `print`."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "print"]


def test_the_library_never_prints():
    """The library returns values or logs (absl); only a command writes its
    output to stdout, so a caller of the library gets no stray lines."""
    library = REPO_ROOT / "official_bert"
    printing = [f"{path.relative_to(REPO_ROOT)}:{line}" for path in sorted(library.rglob("*.py"))
                if (library / "commands") not in path.parents for line in print_calls(path)]
    assert not printing, f"print outside official_bert/commands/: {printing}"


def test_the_print_check_sees_a_print(tmp_path):
    path = tmp_path / "squad.py"
    path.write_text("def predict(x):\n    print(x, flush=True)\n")
    assert print_calls(path) == [2]


def imported_names(path: pathlib.Path) -> set:
    """Every module name `path` imports (absolute imports; function-level ones too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


def imports_a_test(name: str) -> bool:
    """Whether an import of `name` reaches tests/: its package, its support package
    (as tests/ on sys.path names it) or a test module."""
    top = name.split(".")[0]
    return top in ("tests", "support", "conftest") or top.startswith("test_")


def test_tools_and_benchmarks_import_nothing_from_tests():
    """What they share with the tests lives in tools/kit/, so tests/ can change alone."""
    scripts = sorted([*(REPO_ROOT / "tools").rglob("*.py"),
                      *(REPO_ROOT / "benchmarks").rglob("*.py")])
    found = [f"{path.relative_to(REPO_ROOT)}: {name}" for path in scripts
             for name in sorted(imported_names(path)) if imports_a_test(name)]
    assert not found, f"imports of tests/: {found}"


def test_the_tests_import_check_sees_one(tmp_path):
    path = tmp_path / "sweep.py"
    path.write_text("def f():\n    from tests.support import fault_kit\n    import support\n")
    assert sorted(n for n in imported_names(path) if imports_a_test(n)) == [
        "support", "tests.support"]
