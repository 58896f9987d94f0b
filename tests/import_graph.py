"""The package's import graph, read from the source (``ast``), for the structure tests and the
docs: which modules import which (at module level, or anywhere, function bodies included), the
layers a module may import (``LAYERS``, docs/architecture.md), circles, and the table of
docs/architecture.md's "What imports what", which ``python tests/import_graph.py`` prints
(``--modules``: the module map; ``--write``: both into docs/architecture.md)."""

import ast
import re
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "truneg_fairseq"

# The layers, lowest first (docs/architecture.md): a module imports its own layer and lower ones,
# never a higher one. The side modules (errors, output writing and its older name io_utils, the
# fairseq mends, the training engine, checkpoint reading, precision) are below everything; the
# package root (which registers the plugin) is above everything.
LAYERS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    (
        "side",
        (
            "errors",
            "fingerprints",
            "outputs",
            "io_utils",
            "checkpoint_schema",
            "compat",
            "training",
            "precision",
            "checkpoints",
        ),
    ),
    ("core", ("core",)),
    ("text", ("text",)),
    ("lexicon", ("lexicon",)),
    ("data", ("data",)),
    ("models", ("models", "optim")),
    ("evaluation", ("evaluation",)),
    ("tasks", ("tasks",)),
    ("criterions", ("criterions",)),
    ("convert", ("convert",)),
    ("hf", ("hf",)),
    ("pipelines", ("pipelines",)),
    ("cli", ("cli",)),
)


def package_modules() -> Dict[str, Path]:
    """{dotted module name: file} of every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def module_level_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """The statements run when the module is imported: the body, and the bodies of module-level
    ``if``/``try``/``with`` blocks (not functions or classes)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        yield node
        if isinstance(node, (ast.If, ast.While, ast.For)):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody
            for handler in node.handlers:
                todo += handler.body
        elif isinstance(node, ast.With):
            todo += node.body


def imports_of(
    name: str, path: Path, modules: Dict[str, Path], module_level: bool = True
) -> Set[str]:
    """The package's modules that module ``name`` imports (at module level, or anywhere with
    ``module_level=False``); ``from X import y`` counts as the module ``X.y`` when there is one,
    else as ``X``."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = parse(path)
    nodes = module_level_statements(tree) if module_level else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            subs = {f"{source}.{a.name}" for a in node.names} & set(modules)
            found |= subs
            if len(subs) < len(node.names) and source in modules:
                found.add(source)
    found.discard(name)
    return found


def import_graph(module_level: bool = True) -> Dict[str, Set[str]]:
    """{module: the package's modules it imports} over the whole package."""
    modules = package_modules()
    return {n: imports_of(n, p, modules, module_level) for n, p in modules.items()}


def circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """One circle per strongly connected group of modules that import one another (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    out: List[List[str]] = []

    def visit(u: str) -> None:
        index[u] = low[u] = len(index)
        stack.append(u)
        on_stack.add(u)
        for v in sorted(graph.get(u, ())):
            if v not in index:
                visit(v)
                low[u] = min(low[u], low[v])
            elif v in on_stack:
                low[u] = min(low[u], index[v])
        if low[u] == index[u]:
            group = []
            while True:
                v = stack.pop()
                on_stack.discard(v)
                group.append(v)
                if v == u:
                    break
            if len(group) > 1 or u in graph.get(u, ()):
                out.append(sorted(group))

    for u in sorted(graph):
        if u not in index:
            visit(u)
    return out


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return len(LAYERS)
    for i, (_, packages) in enumerate(LAYERS):
        if parts[1] in packages:
            return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")


def upward(graph: Dict[str, Set[str]]) -> List[str]:
    """The imports of ``graph`` from a layer to a higher one (the package root excepted)."""
    out = []
    for src, targets in sorted(graph.items()):
        if "." not in src:
            continue
        for dst in sorted(targets):
            if "." in dst and layer(dst) > layer(src):
                out.append(
                    f"{src} ({LAYERS[layer(src)][0]}) imports {dst} ({LAYERS[layer(dst)][0]})"
                )
    return out


# ---- docs/architecture.md ----------------------------------------------------------------------
def package_of(module: str) -> str:
    """``truneg_fairseq.core.step`` -> ``core``; a module at the top (``errors.py``) is its own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def package_imports() -> Dict[str, Set[str]]:
    """{package: the other packages of truneg_fairseq its modules import, anywhere}."""
    out: Dict[str, Set[str]] = {}
    for src, targets in import_graph(module_level=False).items():
        p = package_of(src)
        if not p:
            continue
        out.setdefault(p, set()).update(
            package_of(t) for t in targets if package_of(t) not in ("", p)
        )
    return out


def imports_table() -> str:
    """The markdown table of docs/architecture.md's "What imports what", layer by layer."""
    graph = package_imports()
    rows = ["| layer | package | imports |", "|---|---|---|"]
    for name, packages in LAYERS:
        for p in packages:
            if p not in graph:
                continue
            deps = ", ".join(f"`{d}`" for d in sorted(graph[p], key=lambda d: (layer("x." + d), d)))
            rows.append(f"| {name} | `{p}` | {deps or 'nothing of the package'} |")
    return "\n".join(rows)


def first_sentence(doc: str, limit: int = 150) -> str:
    """The first sentence of a docstring, on one line (cut at ``limit`` characters)."""
    text = " ".join(doc.split("\n\n")[0].split())
    end = re.search(r"(?<!\bEq)(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)\.(\s|$)", text)
    text = text[: end.start() + 1] if end else text
    return text if len(text) <= limit else text[: limit - 3].rsplit(" ", 1)[0] + " ..."


def modules_map() -> str:
    """The markdown list of docs/architecture.md's "Every module": each package's modules with
    the first sentence of their docstrings."""
    lines = []
    for name, path in package_modules().items():
        doc = ast.get_docstring(parse(path)) or ""
        rel = path.relative_to(PACKAGE).as_posix()
        lines.append(f"- `{rel}`: {first_sentence(doc) or '(no docstring)'}")
    return "\n".join(lines)


def write_architecture(path: Path = REPO / "docs" / "architecture.md") -> None:
    """Put the current import table and module map between their markers in ``path``."""
    text = path.read_text(encoding="utf-8")
    for marker, body in (("imports table", imports_table()), ("modules map", modules_map())):
        start, end = f"<!-- {marker} -->\n", f"\n<!-- end {marker} -->"
        head, rest = text.split(start, 1)
        text = head + start + body + end + rest.split(end, 1)[1]
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_architecture()
    else:
        sys.stdout.write(
            (modules_map() if sys.argv[1:] == ["--modules"] else imports_table()) + "\n"
        )
