"""The library's imports go one way, along the data path, and stay at the top of each module.

Read from the source (nothing is imported): a module may import its own layer's modules and
those of layers before it, never a later layer; inside a layer, modules form no cycle. An import
inside a function is only for something heavy that must not load with the package (TensorFlow,
TF-Agents, matplotlib), and a comment on that line or the line above says so.
"""

import ast
import collections
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "tf_placeto"

# The data path, first to last: source graphs -> devices -> write-back -> measurement (the
# simulator, runtimes that run placed graphs, the cost model, evaluation of placements for real,
# profiling that builds and calibrates the cost model) -> placers -> learned policies -> the
# method registry -> workloads and what a call asks for (settings) -> the pipeline and Python
# API -> reports -> the command line.
LAYERS = [
    ["tf_placeto.errors", "tf_placeto._quiet", "tf_placeto.exchange", "tf_placeto.files",
     "tf_placeto.records", "tf_placeto.cache", "tf_placeto.log", "tf_placeto._version"],
    ["tf_placeto.examples"],
    ["tf_placeto.graph"],
    ["tf_placeto.devices"],
    ["tf_placeto.placement", "tf_placeto.rewrite"],
    ["tf_placeto.measure.simulator"],
    ["tf_placeto.measure.runtimes"],
    ["tf_placeto.measure.costs"],
    ["tf_placeto.measure.evaluation"],
    ["tf_placeto.measure.profiling", "tf_placeto.measure"],
    ["tf_placeto.placers"],
    ["tf_placeto.policy"],
    ["tf_placeto.methods"],
    ["tf_placeto.workload", "tf_placeto.settings"],
    ["tf_placeto.pipeline", "tf_placeto.api", "tf_placeto.functions",
     "tf_placeto.optimized_step", "tf_placeto.training_api", "tf_placeto.choices",
     "tf_placeto.frontend", "tf_placeto.cost_graphs"],
    ["tf_placeto.compare", "tf_placeto.plots"],
    ["tf_placeto.cli", "tf_placeto.__main__"],
]
# What the command line may import besides its own modules: the public API, whole modules of
# it, and from the others only the names tf_placeto/__init__.py exports (_public_names).
PUBLIC_MODULES = {"tf_placeto.api", "tf_placeto.errors", "tf_placeto.compare", "tf_placeto.plots",
                  "tf_placeto.choices", "tf_placeto.frontend", "tf_placeto.cost_graphs"}
# Loaded inside functions so that `import tf_placeto` stays light (grpc: TensorFlow's native
# RPC library, needed only to watch a remote cluster).
HEAVY = {"tensorflow", "tf_agents", "tf_keras", "keras", "tensorflow_probability", "matplotlib",
         "highspy", "grpc"}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: pathlib.Path):
    """(imported module, line, inside a function) for every import in `path`."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno, inside
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package
                    for _ in range(child.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                for alias in child.names:   # `from pkg import module` names a module
                    yield f"{base}.{alias.name}", child.lineno, inside
            yield from walk(child, inside)

    yield from walk(tree, False)


def _internal(imported: str, modules: dict):
    """The tf_placeto module that `imported` names (the longest known prefix), or None."""
    while imported and imported not in modules:
        imported = imported.rpartition(".")[0]
    return imported or None


def _layer(module: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer of tests/test_layers.py: add it")


def _edges():
    modules = _modules()
    for name, path in modules.items():
        if name == "tf_placeto":
            continue
        for imported, line, inside in _imports(name, path):
            target = _internal(imported, modules)
            if target is not None and target != name:
                yield name, target, line, inside, path


def test_every_module_has_a_layer():
    for name in _modules():
        if name != "tf_placeto":
            _layer(name)


def test_imports_never_go_back_along_the_data_path():
    backward = [f"{source} imports {target} (line {line})"
                for source, target, line, _, _ in _edges()
                if target == "tf_placeto" or _layer(target) > _layer(source)]
    assert not backward, "\n".join(backward)


def test_modules_import_each_other_without_cycles():
    graph = collections.defaultdict(set)
    for source, target, _, _, _ in _edges():
        if target != "tf_placeto" and not source.startswith(target + "."):
            graph[source].add(target)    # a package's __init__ may be imported by its modules
    cycles = []
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "\n".join(cycles)


def _commented(lines: list, line: int) -> bool:
    """A comment on the import's line, on a line of the imports grouped with it, or on the
    line above that group."""
    index = line - 1
    while index >= 0:
        text = lines[index].strip()
        if "#" in text:
            return True
        if not text.startswith(("import ", "from ")):
            return False
        index -= 1
    return False


@pytest.mark.parametrize("name", sorted(_modules()))
def test_imports_inside_functions_load_only_heavy_packages_and_say_so(name):
    path = _modules()[name]
    lines = path.read_text().splitlines()
    offending = []
    for imported, line, inside in _imports(name, path):
        if not inside:
            continue
        heavy = imported.split(".")[0] in HEAVY or imported.startswith("tf_placeto.")
        if not (heavy and _commented(lines, line)):
            offending.append(f"line {line}: {imported}")
    assert not offending, f"{name}: move to the top, or say why it is lazy:\n" + \
        "\n".join(offending)


def _public_names() -> set:
    """module.name of every name tf_placeto/__init__.py exports: its _EXPORTS map and what it
    imports itself (__version__)."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["_EXPORTS"]:
            names |= {f"{module}.{name}" for name, module in ast.literal_eval(node.value).items()}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tf_placeto"):
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_the_command_line_imports_only_the_public_api():
    """Each command parses, calls what a Python user can call, and prints: where it needs
    more, the API gains it."""
    modules, exported = _modules(), _public_names()
    private = [f"{source} imports {imported} (line {line})"
               for source, path in modules.items() if source.startswith("tf_placeto.cli")
               for imported, line, _ in _imports(source, path)
               if imported.startswith("tf_placeto")
               and not _internal(imported, modules).startswith("tf_placeto.cli")
               and _internal(imported, modules) not in PUBLIC_MODULES
               and imported not in exported]
    assert not private, "\n".join(private)

