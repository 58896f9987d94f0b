"""The package's import graph (every ``import`` of a ``truneg_fairseq`` module, at module level
or inside a function) has no circle and goes down the layers; checkpoints are read for
inference in one module only."""

import ast
from pathlib import Path
from typing import Dict, List, Set

from test_structure import LAYERS, layer
from utils import REPO

PACKAGE = REPO / "truneg_fairseq"


def module_files() -> Dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported_modules(name: str, path: Path, modules: Dict[str, Path]) -> Set[str]:
    """The package's modules that ``name`` imports: for ``from X import y`` the module X.y when
    there is one (X itself otherwise)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in modules]
            found.update(subs)
            if len(subs) < len(node.names) and source in modules:
                found.add(source)
    found.discard(name)
    return found


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    state: Dict[str, int] = {}
    stack: List[str] = []
    out: List[List[str]] = []

    def visit(u: str) -> None:
        state[u] = 1
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                out.append(stack[stack.index(v) :] + [v])
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(graph):
        if u not in state:
            visit(u)
    return out


def package_graph() -> Dict[str, Set[str]]:
    """{module: the package's modules it imports} over the whole package."""
    modules = module_files()
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def test_the_import_graph_has_no_circle():
    graph = package_graph()
    assert "truneg_fairseq.errors" in graph["truneg_fairseq.text.spec"]  # the graph sees imports
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_circle_detector_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


# The layers, lowest first (docs/architecture.md): a module may import modules of its own layer
# and of the layers below it, never above. The package root registers the plugin with fairseq
# (loaders import it before reading a checkpoint) and is the only module any layer may import.
# One table for both checks: tests/test_structure.py's, here applied to every import.
layer_of = layer


def upward_imports(graph: Dict[str, Set[str]]) -> List[str]:
    out = []
    for src, targets in sorted(graph.items()):
        if src == "truneg_fairseq":
            continue
        for dst in sorted(targets):
            if dst != "truneg_fairseq" and layer_of(dst) > layer_of(src):
                out.append(
                    f"{src} ({LAYERS[layer_of(src)][0]}) imports {dst} ({LAYERS[layer_of(dst)][0]})"
                )
    return out


def test_imports_go_down_the_layers():
    graph = package_graph()
    assert (
        "truneg_fairseq.data.corpus" in graph["truneg_fairseq.data.cline"]
    )  # the graph sees imports
    bad = upward_imports(graph)
    assert not bad, "imports against the layers (docs/architecture.md):\n" + "\n".join(bad)


def test_the_direction_check_finds_an_upward_import():
    graph = {
        "truneg_fairseq.data.corpus": {
            "truneg_fairseq.models.electra",
            "truneg_fairseq.text.spec",
            "truneg_fairseq",
        }
    }
    assert upward_imports(graph) == [
        "truneg_fairseq.data.corpus (data) imports truneg_fairseq.models.electra (models)"
    ]


# fairseq's functions that read a checkpoint file. Inference reads checkpoints only through
# truneg_fairseq.checkpoints.load_for_inference, so that every script, evaluation and export gets
# the same config checks, the same --data resolution and the same one-line errors.
CHECKPOINT_READERS = {
    "load_checkpoint_to_cpu",
    "load_model_ensemble",
    "load_model_ensemble_and_task",
}


def checkpoint_reads(path: Path) -> List[str]:
    """``name:line`` of each call in ``path`` to one of :data:`CHECKPOINT_READERS`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name in CHECKPOINT_READERS:
                out.append(f"{name}:{node.lineno}")
    return out


def test_only_the_inference_loader_reads_checkpoints():
    sources = [
        p
        for top in ("truneg_fairseq", "scripts", "examples", "benchmarks")
        for p in (REPO / top).rglob("*.py")
    ]
    found = {str(p.relative_to(REPO)): checkpoint_reads(p) for p in sources}
    found = {p: calls for p, calls in found.items() if calls}
    assert set(found) == {"truneg_fairseq/checkpoints.py"}, (
        "checkpoints read for inference outside truneg_fairseq.checkpoints.load_for_inference: "
        f"{ {p: c for p, c in found.items() if p != 'truneg_fairseq/checkpoints.py'} }"
    )


def test_the_checkpoint_read_finder_sees_a_call(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "from fairseq import checkpoint_utils\n\n"
        "def f(p):\n    return checkpoint_utils.load_model_ensemble_and_task([p])\n"
    )
    assert checkpoint_reads(src) == ["load_model_ensemble_and_task:4"]


def test_compat_and_the_checkpoint_loader_import_one_way():
    """The loader uses the mends (and the errors they raise); no mend imports the loader."""
    graph = package_graph()
    assert "truneg_fairseq.compat.checkpoint_errors" in graph["truneg_fairseq.checkpoints"]
    back = sorted(
        m
        for m, deps in graph.items()
        if m.startswith("truneg_fairseq.compat") and "truneg_fairseq.checkpoints" in deps
    )
    assert not back, f"compat modules importing truneg_fairseq.checkpoints: {back}"
