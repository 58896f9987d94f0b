"""The package's import graph (every ``import`` of a ``truneg_fairseq`` module, at module level
or inside a function) has no circle and goes down the layers; checkpoints are read for
inference in one module only."""

import ast
from pathlib import Path
from typing import Dict, List, Set

from import_graph import LAYERS, circles, import_graph, layer
from repo_paths import REPO


def package_graph() -> Dict[str, Set[str]]:
    """{module: the package's modules it imports, anywhere} over the whole package."""
    return import_graph(module_level=False)


def test_the_import_graph_has_no_circle():
    graph = package_graph()
    assert "truneg_fairseq.errors" in graph["truneg_fairseq.text.spec"]  # the graph sees imports
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


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
        "truneg_fairseq.data.corpus_steps" in graph["truneg_fairseq.data.cline_data"]
    )  # the graph sees imports
    bad = upward_imports(graph)
    assert not bad, "imports against the layers (docs/architecture.md):\n" + "\n".join(bad)


def test_the_direction_check_finds_an_upward_import():
    graph = {
        "truneg_fairseq.data.corpus_steps": {
            "truneg_fairseq.models.electra",
            "truneg_fairseq.text.spec",
            "truneg_fairseq",
        }
    }
    assert upward_imports(graph) == [
        "truneg_fairseq.data.corpus_steps (data) imports truneg_fairseq.models.electra (models)"
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
    assert "truneg_fairseq.checkpoint_schema.load_errors" in graph["truneg_fairseq.checkpoints"]
    back = sorted(
        m
        for m, deps in graph.items()
        if m.startswith("truneg_fairseq.compat") and "truneg_fairseq.checkpoints" in deps
    )
    assert not back, f"compat modules importing truneg_fairseq.checkpoints: {back}"
