"""The package's shape, checked from the source alone (nothing is imported or trained): no module
over 450 lines, no import circle at module level, no layer importing a higher one
(docs/architecture.md), no block of 6 or more lines copied between two places, no ``sys.path``
edits anywhere in the repository's Python, and no command run by its path under ``scripts/``
from inside the package."""

import ast
import hashlib
import re
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

from import_graph import (  # noqa: F401  (LAYERS and layer: the one table of the layers)
    LAYERS,
    PACKAGE,
    circles,
    import_graph,
    layer,
    package_modules,
    parse,
    upward,
)
from repo_paths import REPO

MAX_LINES = 450
MIN_BLOCK = 6
# where sys.path must not be touched: the package and everything that runs it
SYS_PATH_DIRS = ("truneg_fairseq", "scripts", "tests", "benchmarks", "examples")


def relative(path: Path, root: Path = REPO) -> str:
    return str(path.relative_to(root))


# ---- size --------------------------------------------------------------------------------------
def oversized(paths, limit: int = MAX_LINES) -> List[str]:
    out = []
    for path in paths:
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out.append(f"{relative(path)}: {n} lines")
    return out


def test_no_module_is_over_450_lines():
    bad = oversized(package_modules().values())
    assert not bad, f"modules over {MAX_LINES} lines (split them by job):\n" + "\n".join(bad)


# ---- imports -----------------------------------------------------------------------------------
def test_no_import_circle():
    graph = import_graph()
    assert "truneg_fairseq.models.sizes" in graph["truneg_fairseq.models.electra_config"]
    found = circles(graph)
    assert not found, "modules importing one another at module level:\n" + "\n".join(
        " <-> ".join(group) for group in found
    )


def test_the_circle_finder_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert circles(graph) == [["a", "b", "c"], ["e"]]


def test_lower_layers_never_import_higher_ones():
    bad = upward(import_graph())
    assert not bad, "imports against the layers (docs/architecture.md):\n" + "\n".join(bad)


def test_the_layer_check_finds_an_upward_import():
    graph = {"truneg_fairseq.data.corpus_steps": {"truneg_fairseq.tasks.cline", "truneg_fairseq"}}
    assert upward(graph) == [
        "truneg_fairseq.data.corpus_steps (data) imports truneg_fairseq.tasks.cline (tasks)"
    ]


# ---- copied blocks -----------------------------------------------------------------------------
def skipped_lines(tree: ast.Module) -> Set[int]:
    """Lines that do not count toward a copied block: imports, docstrings (and any other bare
    string statement), and the field lines of dataclasses (``name: type = field(...)``, which
    configs repeat by nature)."""
    skip: Set[int] = set()

    def span(node) -> range:
        return range(node.lineno, node.end_lineno + 1)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(span(node))
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            skip.update(span(node))
        elif isinstance(node, ast.ClassDef) and any(
            "dataclass" in ast.unparse(d) for d in node.decorator_list
        ):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign):
                    skip.update(span(stmt))
    return skip


def significant_lines(path: Path) -> List[Tuple[int, str]]:
    """(line number, stripped text) of the lines a copied block is made of."""
    source = path.read_text(encoding="utf-8")
    skip = skipped_lines(ast.parse(source))
    out = []
    for n, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        if text and not text.startswith("#") and n not in skip:
            out.append((n, text))
    return out


def copied_blocks(paths, size: int = MIN_BLOCK, root: Path = REPO) -> List[str]:
    """Every run of ``size`` or more significant lines found, identical, in two places (two
    files, or two non-overlapping places of one file); one line per pair of places."""
    seen: Dict[str, Tuple[Path, int, int]] = {}
    pairs: Dict[Tuple[str, str], List[Tuple[int, int, int, int]]] = {}
    for path in paths:
        lines = significant_lines(path)
        for i in range(len(lines) - size + 1):
            window = lines[i : i + size]
            key = hashlib.sha1("\n".join(t for _, t in window).encode()).hexdigest()
            here = (path, window[0][0], window[-1][0])
            first = seen.setdefault(key, here)
            if first is here or (first[0] == path and first[2] >= here[1]):
                continue
            pair = (relative(first[0], root), relative(path, root))
            pairs.setdefault(pair, []).append((first[1], first[2], here[1], here[2]))
    out = []
    for (a, b), spans in sorted(pairs.items()):
        # overlapping windows of one copy: report each run of them once, as its full extent
        spans.sort()
        runs = [list(spans[0])]
        for s in spans[1:]:
            run = runs[-1]
            if s[0] <= run[1] + 1 and s[2] <= run[3] + 1:
                run[1], run[3] = max(run[1], s[1]), max(run[3], s[3])
            else:
                runs.append(list(s))
        out += [f"{a}:{r[0]}-{r[1]} = {b}:{r[2]}-{r[3]}" for r in runs]
    return out


def test_no_block_of_six_lines_is_copied():
    bad = copied_blocks(package_modules().values())
    assert not bad, (
        f"blocks of {MIN_BLOCK}+ identical lines in two places (make one function of them):\n"
        + "\n".join(bad)
    )


def test_the_copy_finder_finds_a_copy(tmp_path):
    body = "\n".join(f"    x{i} = compute({i}) + x{i - 1}" for i in range(1, 8))
    one = tmp_path / "one.py"
    two = tmp_path / "two.py"
    one.write_text(f'"""doc"""\nimport os\n\n\ndef f():\n    x0 = 0\n{body}\n    return x7\n')
    two.write_text(f"def g():\n    x0 = 1\n{body}\n")
    found = copied_blocks([one, two], root=tmp_path)
    fields = tmp_path / "fields.py"
    fields.write_text(
        "from dataclasses import dataclass\n\n\n@dataclass\nclass A:\n"
        + "\n".join(f"    a{i}: int = 0" for i in range(8))
        + "\n\n\n@dataclass\nclass B:\n"
        + "\n".join(f"    a{i}: int = 0" for i in range(8))
        + "\n"
    )
    assert copied_blocks([fields], root=tmp_path) == []  # dataclass fields do not count
    assert found == ["one.py:7-13 = two.py:3-9"]


def repeated_helpers(paths) -> List[str]:
    """``a = b`` for each two module-level functions of ``paths`` (not tests) with the same
    arguments and body, docstrings aside: one helper written twice."""
    seen: Dict[str, str] = {}
    out = []
    for path in paths:
        for node in parse(path).body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("test_"):
                continue
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            key = ast.dump(node.args) + ast.dump(ast.Module(body=body, type_ignores=[]))
            where = f"{path.name}:{node.name}"
            if key in seen:
                out.append(f"{seen[key]} = {where}")
            else:
                seen[key] = where
    return out


def test_no_test_helper_is_written_twice():
    """A helper the tests share is in one of tests/'s helper modules (docs/testing.md)."""
    tests = sorted((REPO / "tests").glob("*.py"))
    assert len(tests) > 90
    bad = repeated_helpers(tests)
    assert not bad, "helpers written twice (move one into a tests/ helper module):\n" + "\n".join(
        bad
    )


def test_the_helper_finder_finds_a_repeat(tmp_path):
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text('def port():\n    """Free."""\n    return bind(0)\n')
    two.write_text("def _port():\n    return bind(0)\n\n\ndef test_port():\n    return bind(0)\n")
    assert repeated_helpers([one, two]) == ["one.py:port = two.py:_port"]


# ---- sys.path and scripts by path --------------------------------------------------------------
def python_files(dirs) -> List[Path]:
    return sorted(p for d in dirs for p in (REPO / d).rglob("*.py") if ".venv" not in p.parts)


# list methods that change sys.path in place
SYS_PATH_EDITS = {"append", "extend", "insert", "remove", "pop", "clear", "reverse", "sort"}


def _is_sys_path(node) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def _is_restore(value) -> bool:
    """A value that puts back a copy saved earlier: a name (``saved``) or an item of one
    (``saved[2]``), never an expression that builds a new path list."""
    while isinstance(value, ast.Subscript):
        value = value.value
    return isinstance(value, ast.Name)


def _assignments(node) -> List[Tuple[ast.expr, Optional[ast.expr]]]:
    """(target, value) pairs of an assignment, tuples paired item by item; value None where
    it cannot be told (an augmented assignment, a tuple target from one value, a ``del``)."""
    if isinstance(node, ast.Assign):
        out = []
        for target in node.targets:
            if (
                isinstance(target, ast.Tuple)
                and isinstance(node.value, ast.Tuple)
                and len(target.elts) == len(node.value.elts)
            ):
                out += list(zip(target.elts, node.value.elts))
            elif isinstance(target, ast.Tuple):
                out += [(t, None) for t in target.elts]
            else:
                out.append((target, node.value))
        return out
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [(node.target, None)]
    if isinstance(node, ast.Delete):
        return [(t, None) for t in node.targets]
    return []


def sys_path_uses(paths, root: Path = REPO) -> List[str]:
    """Places that change ``sys.path``: a list method that edits it in place
    (:data:`SYS_PATH_EDITS`), an assignment to it or to a slice of it, ``+=``, ``del``. Reading
    it (``list(sys.path)``, ``p in sys.path``) and putting back a saved copy
    (``sys.path[:] = saved``) are not edits."""
    out = []
    for path in paths:
        lines = set()
        for node in ast.walk(parse(path)):
            edit = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in SYS_PATH_EDITS
                and _is_sys_path(node.func.value)
            )
            for target, value in _assignments(node):
                while isinstance(target, ast.Subscript):
                    target = target.value
                if _is_sys_path(target) and (value is None or not _is_restore(value)):
                    edit = True
            if edit:
                lines.add(node.lineno)
        out += [f"{relative(path, root)}:{n}" for n in sorted(lines)]
    return out


def test_nothing_edits_sys_path():
    bad = sys_path_uses(python_files(SYS_PATH_DIRS))
    assert not bad, (
        "sys.path used (import the installed package; tests import their helpers through "
        "pytest's rootdir):\n" + "\n".join(bad)
    )


def scripts_run_by_path(paths, root: Path = REPO) -> List[str]:
    """Places that build a path into ``scripts/`` (``"scripts"`` as a path part, a literal
    ``scripts/NAME.py`` on its own) or run a file by path (``runpy.run_path``): the package
    calls the commands' library functions (``truneg_fairseq.cli``) instead. Messages that name
    a script for the user are sentences, not paths, and pass."""
    out = []
    for path in paths:
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                value = node.value.strip()
                bare = value.startswith(("scripts/", "./scripts/")) and value.endswith(".py")
                if value == "scripts" or (bare and " " not in value):
                    out.append(f"{relative(path, root)}:{node.lineno}: {value!r}")
            elif isinstance(node, ast.Attribute) and node.attr == "run_path":
                out.append(f"{relative(path, root)}:{node.lineno}: run_path")
    return out


def test_the_package_runs_no_script_by_path():
    bad = scripts_run_by_path(package_modules().values())
    assert not bad, (
        "the package runs files of scripts/ (call truneg_fairseq.cli.<name>.main or the library "
        "function instead):\n" + "\n".join(bad)
    )


def test_the_path_checks_find_planted_cases(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os, runpy, sys\n"
        "sys.path.insert(0, os.getcwd())\n"
        'cmd = [sys.executable, os.path.join(ROOT, "scripts", "demo.py")]\n'
        'runpy.run_path("scripts/demo.py")\n'
        'raise SystemExit("build it with scripts/build_synonym_table.py first")\n'
    )
    assert sys_path_uses([bad], root=tmp_path) == ["bad.py:2"]
    edits = tmp_path / "edits.py"
    edits.write_text(
        "import sys\n"
        "saved = list(sys.path)\n"  # a read
        "sys.path.append('x')\n"
        "sys.path[:0] = ['x']\n"
        "sys.path = ['x'] + sys.path\n"
        "sys.path += ['x']\n"
        "del sys.path[0]\n"
        "sys.path[:] = saved\n"  # restores
        "sys.argv, sys.path[:] = saved[1], saved[2]\n"
        "sys.path = saved\n"
        "found = 'x' in sys.path or sys.path.index('x')\n"  # reads
    )
    assert sys_path_uses([edits], root=tmp_path) == [f"edits.py:{n}" for n in (3, 4, 5, 6, 7)]
    assert sorted(scripts_run_by_path([bad], root=tmp_path)) == [
        "bad.py:3: 'scripts'",
        "bad.py:4: 'scripts/demo.py'",
        "bad.py:4: run_path",
    ]  # the message naming a script for the user passes


# ---- names -------------------------------------------------------------------------------------
_REGISTRATION_FOLDERS = {
    "tasks": "register_task",
    "models": "register_model",
    "criterions": "register_criterion",
}


def test_a_file_name_repeats_only_by_the_two_naming_conventions():
    """docs/architecture.md: a base name is unique, except a fairseq task/model/criterion named by
    what it registers, and a command's ``cli/NAME.py`` over the ``pipelines/NAME.py`` it calls."""
    by_name: Dict[str, List[str]] = {}
    for path in package_modules().values():
        if path.name != "__init__.py":
            by_name.setdefault(path.name, []).append(relative(path))
    repeated = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    assert repeated, "the conventions are in use: cline.py, electra.py, squad.py, perturb.py"
    bad = []
    for name, paths in repeated.items():
        stem = name[: -len(".py")]
        folders = {str(Path(p).parent.relative_to("truneg_fairseq")) for p in paths}
        if folders <= set(_REGISTRATION_FOLDERS):
            for p in paths:  # each registers the name it is filed under
                call = _REGISTRATION_FOLDERS[str(Path(p).parent.name)]
                if not re.search(rf'@{call}\(\s*"{stem}"', (REPO / p).read_text()):
                    bad.append(f"{p} does not register {call}({stem!r})")
        elif folders == {"cli", "pipelines"}:
            cli = (PACKAGE / "cli" / name).read_text()
            if f"truneg_fairseq.pipelines.{stem} import" not in cli:
                bad.append(
                    f"truneg_fairseq/cli/{name} does not call truneg_fairseq/pipelines/{name}"
                )
        else:
            bad.append(f"{name}: {paths}")
    assert not bad, "file names repeated outside the two conventions:\n" + "\n".join(bad)


def test_the_package_imports_output_writing_by_one_name():
    """``truneg_fairseq.outputs`` is the one name the code imports; ``io_utils`` only re-exports it
    for scripts written against earlier releases."""
    import truneg_fairseq.io_utils as alias
    from truneg_fairseq import outputs

    assert all(getattr(alias, name) is getattr(outputs, name) for name in outputs.__all__)

    def imports_alias(path: Path) -> bool:
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.ImportFrom) and (
                node.module == "truneg_fairseq.io_utils"
                or (
                    node.module == "truneg_fairseq"
                    and any(a.name == "io_utils" for a in node.names)
                )
            ):
                return True
            if isinstance(node, ast.Import) and any(
                a.name == "truneg_fairseq.io_utils" for a in node.names
            ):
                return True
        return False

    users = [
        str(p.relative_to(REPO))
        for p in python_files(("truneg_fairseq", "tests", "benchmarks", "scripts", "examples"))
        if p.name != "io_utils.py" and p != Path(__file__) and imports_alias(p)
    ]
    assert not users, f"import truneg_fairseq.outputs instead of io_utils in: {users}"


# ---- errors --------------------------------------------------------------------------------------
def error_classes(paths) -> List[str]:
    """``file: Class`` for every exception class the files define (a base ending in Error)."""
    out = []
    for path in paths:
        for node in parse(path).body:
            if isinstance(node, ast.ClassDef) and any(
                getattr(b, "id", getattr(b, "attr", "")).endswith(("Error", "Exception"))
                for b in node.bases
            ):
                out.append(f"{relative(path)}: {node.name}")
    return out


def test_every_error_type_is_defined_in_errors_py():
    """One place for the package's errors (the standard-library outputs package keeps its two in
    one module, re-exported by errors.py)."""
    allowed = ("truneg_fairseq/errors.py", "truneg_fairseq/outputs/output_errors.py")
    found = error_classes(package_modules().values())
    assert len([f for f in found if f.startswith("truneg_fairseq/errors.py")]) > 20
    bad = [f for f in found if not f.startswith(allowed)]
    assert not bad, "error types outside truneg_fairseq/errors.py:\n" + "\n".join(bad)


def test_every_error_type_has_the_package_base_and_keeps_its_builtin_one():
    """``except TrunegError`` catches any error of the package; ``except ValueError`` (or
    ``RuntimeError``) goes on catching those that were one."""
    from truneg_fairseq import errors

    types = [
        t for t in vars(errors).values() if isinstance(t, type) and issubclass(t, BaseException)
    ]
    assert len(types) > 20
    assert [t.__name__ for t in types if not issubclass(t, errors.TrunegError)] == []
    plain = [t.__name__ for t in types if not issubclass(t, (ValueError, RuntimeError))]
    assert plain == ["TrunegError"]
    assert issubclass(errors.CorpusError, ValueError)
    assert issubclass(errors.CheckpointError, RuntimeError)
    assert issubclass(errors.OutputDirError, RuntimeError)


def test_every_mend_names_its_upstream_defect():
    """compat/ holds mends only, each docstring naming the upstream defect (issue number where
    there is one) in an ``Upstream:`` paragraph."""
    compat = PACKAGE / "compat"
    helpers = {"__init__.py", "wrapping.py"}  # the installer, the wrapping helper of every mend
    missing = [
        p.name
        for p in sorted(compat.glob("*.py"))
        if p.name not in helpers and "\nUpstream: " not in (ast.get_docstring(parse(p)) or "")
    ]
    assert not missing, f"compat modules without an Upstream: paragraph: {missing}"
