"""Every command line the README, docs/*.md and examples/*/README.md show (code blocks and inline
code) works as written: the ones that run at tiny scale run, with their placeholder paths
(DATA, CKPT, work/data-bin, ...) replaced by the session's fixtures; the others are checked as
far as a command line can be without the data it names.

* ``fairseq-validate`` and ``truneg-evaluate`` / ``scripts/evaluate_mlm.py`` (``--data`` on a
  tiny checkpoint trained with hard correction, ``--text`` on an imported tiny BERT) run;
* ``X --help`` runs;
* every other ``truneg-*`` / ``python scripts/*.py`` / ``python examples/*.py`` line (also behind
  ``torchrun``) is parsed by the command's own parser, stopped right after parsing: no unknown or
  missing argument, no old flag name kept only as a hidden alias;
* ``fairseq-train``: every flag is one fairseq-train declares for that task, model and criterion
  (``...`` stands for the flags left out); ``fairseq-hydra-train``: the config exists and every
  ``KEY=VALUE`` names a field it declares;
* ``bash examples/**.sh``: the recipe exists, gets no more arguments than it reads before its
  pass-through flags, and each ``VAR=...`` before it is a variable it reads;
* ``make TARGET``: the Makefile has the target; ``python benchmarks/*.py``: the file exists.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import List, NamedTuple

import pytest
import tomllib
from fairseq_runs import TINY_ROBERTA, fairseq_train
from objective_cases import registry_kept
from repo_paths import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
DOCS += sorted((REPO / "examples").glob("*/README.md"))
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")
# what a recipe reads from the environment: ${VAR:-...}, ${VAR-...}, ${VAR:=...}
READ = re.compile(r"\$\{([A-Z][A-Z0-9_]*):?[-=]")
SHELL_ENDS = {"|", "||", "&&", ";", ">", ">>", "2>&1", "&", "<"}
STARTS = ("fairseq-", "truneg-", "python", "bash", "make", "torchrun")


class DocCommand(NamedTuple):
    where: str  # file:line
    env: dict  # VAR=value before the program
    argv: List[str]  # program and arguments, $PWD and ~ left as written

    @property
    def program(self) -> str:
        return self.argv[0]


def _logical_lines(block: str, first_line: int):
    """(line number, text) of a code block with backslash continuations joined."""
    text, start = "", first_line
    for i, line in enumerate(block.split("\n")):
        if not text:
            start = first_line + i
        if line.rstrip().endswith("\\"):
            text += line.rstrip()[:-1] + " "
            continue
        yield start, text + line
        text = ""


def _commands(line: str):
    """The simple commands of one shell line (split at ``&&``, ``;``, pipes; a redirection
    ends its command); lines that are not shell (output, Python) give nothing."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        return
    current: List[str] = []
    for tok in tokens + [";"]:
        if tok in SHELL_ENDS or tok.startswith((">", "2>")):
            env = {}
            words = list(current)
            while words and ENV.match(words[0]):
                k, v = words.pop(0).split("=", 1)
                env[k] = v
            usage = any(w.startswith("[") for w in words)  # a usage synopsis, not a command
            if words and words[0].startswith(STARTS) and not words[0].endswith((":", ",")):
                if not usage:
                    yield env, words
            current = [] if tok not in (">", ">>", "<") else None
            if current is None:
                current = []
            continue
        current.append(tok)


def doc_commands() -> List[DocCommand]:
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        # architecture.md's module map quotes the modules' docstrings (RST), not commands
        text = re.sub(
            r"<!-- modules map -->.*?<!-- end modules map -->",
            lambda m: "\n" * m.group(0).count("\n"),
            text,
            flags=re.S,
        )
        rel = path.relative_to(REPO)
        fenced = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
        for m in fenced.finditer(text):
            if m.group(1).strip() not in ("", "bash", "sh", "shell", "console"):
                continue
            first = text[: m.start()].count("\n") + 2
            for n, line in _logical_lines(m.group(2), first):
                for env, argv in _commands(line):
                    out.append(DocCommand(f"{rel}:{n}", env, argv))
        prose = fenced.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for m in re.finditer(r"`([^`]+)`", prose):
            span = " ".join(m.group(1).split())
            if not span.startswith(STARTS) or " " not in span:
                continue
            n = prose[: m.start()].count("\n") + 1
            for env, argv in _commands(span):
                out.append(DocCommand(f"{rel}:{n}", env, argv))
    return out


COMMANDS = doc_commands()


def _kind(c: DocCommand) -> str:
    argv = c.argv
    if argv[-1:] == ["--help"] or argv[-1:] == ["-h"]:
        return "help"
    prog = argv[0]
    if prog == "fairseq-validate":
        return "validate"
    if prog == "fairseq-hydra-train" or (prog == "fairseq-train" and "--arch" in argv):
        return prog  # a fairseq-train without --arch is a fragment in prose
    if prog == "make":
        return "make"
    if prog == "bash" and len(argv) > 1 and argv[1].startswith("examples/"):
        return "recipe"
    script = _script(c)
    if script is not None and script.startswith("benchmarks/"):
        return "benchmark"
    module = _module(c)
    if module is None:
        return "other"
    if module == "truneg_fairseq.cli.evaluate_mlm":
        return "evaluate"
    return "parse"


def _script(c: DocCommand):
    """The .py file a python/torchrun line runs (relative to the checkout)."""
    if c.program in ("python", "python3", "torchrun"):
        for a in c.argv[1:]:
            if a.endswith(".py"):
                return a.replace("$PWD/", "")
    return None


def _module(c: DocCommand):
    """The truneg_fairseq.cli module a command line runs, or None."""
    if c.program in SCRIPTS:
        return SCRIPTS[c.program].split(":")[0]
    script = _script(c)
    if script is None or not (REPO / script).is_file():
        return None
    m = re.search(
        r"^from (truneg_fairseq\.cli\.\w+) import main", (REPO / script).read_text(), re.M
    )
    return m.group(1) if m else None


def _args(c: DocCommand) -> List[str]:
    """The command's own arguments (after the program, the script, torchrun's options)."""
    if c.program in SCRIPTS:
        return c.argv[1:]
    script = _script(c)
    i = next(i for i, a in enumerate(c.argv) if a.replace("$PWD/", "") == script)
    return c.argv[i + 1 :]


def _id(c: DocCommand) -> str:
    return f"{c.where}:{_kind(c)}:{' '.join(c.argv[:2])}"


def _select(*kinds):
    return [pytest.param(c, id=_id(c)) for c in COMMANDS if _kind(c) in kinds]


def test_the_documents_show_commands_of_each_kind():
    kinds = {_kind(c) for c in COMMANDS}
    assert {"validate", "evaluate", "parse", "recipe", "fairseq-train", "make"} <= kinds, kinds
    assert len(COMMANDS) > 60


def _expand(a: str) -> str:
    return a.replace("$PWD", str(REPO)).replace("${PWD}", str(REPO))


# ---- command lines parsed by the command's own parser -------------------------------------------
class _Parsed(Exception):
    def __init__(self, parser, namespace):
        self.parser, self.namespace = parser, namespace


def _hidden_flags(parser) -> set:
    return {s for a in parser._actions if a.help == argparse.SUPPRESS for s in a.option_strings}


@pytest.mark.parametrize("command", _select("parse"))
def test_a_command_line_parses_as_written(command, monkeypatch, capsys):
    import importlib

    from truneg_fairseq.cli.args import CommandParser

    def parse_only(self, args=None, namespace=None):
        ns = argparse.ArgumentParser.parse_args(self, args, namespace)
        if self.check is not None:
            self.check(self, ns)
        raise _Parsed(self, ns)

    monkeypatch.setattr(CommandParser, "parse_args", parse_only)
    args = [a for a in map(_expand, _args(command)) if a != "..."]
    module = importlib.import_module(_module(command))
    if module.__name__ == "truneg_fairseq.cli.train_help":  # fairseq's parser: it runs whole
        assert module.main(args) == 0, command.where
        return
    try:
        with registry_kept():  # a --user-dir's objectives leave with the test
            module.main(args)
    except SystemExit as e:
        pytest.fail(f"{command.where}: {' '.join(command.argv)}\n{capsys.readouterr().err}{e}")
    except _Parsed as p:
        used = {a.split("=", 1)[0] for a in args if a.startswith("--")}
        hidden = used & _hidden_flags(p.parser)
        assert not hidden, f"{command.where}: old flag name(s) {hidden}"
        err = capsys.readouterr().err
        assert "is now" not in err, f"{command.where}: {err}"
        return
    pytest.fail(f"{command.where}: the command did not parse its arguments")


@pytest.mark.parametrize("command", _select("help"))
def test_help_as_written(command, tmp_path):
    argv = [_expand(a) for a in command.argv]
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    elif argv[0].startswith("fairseq-"):  # the environment's, active or not
        argv[0] = os.path.join(os.path.dirname(sys.executable), argv[0])
    elif argv[0] in SCRIPTS:
        module = _module(command)
        argv = [sys.executable, "-c", f"import sys; from {module} import main; sys.exit(main())"]
        argv += command.argv[1:]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]


# ---- command lines run at tiny scale ---------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(data_bin, synonym_table, tmp_path_factory):
    """A tiny RoBERTa trained 2 updates with hard correction on the session corpus."""
    save = tmp_path_factory.mktemp("doc_commands") / "ck"
    fairseq_train(
        data_bin,
        save,
        [*TINY_ROBERTA, "--criterion", "mlm_hard_correction", "--synonym-table"]
        + [str(synonym_table), "--max-update", "2"],
    )
    return save / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def imported(tmp_path_factory, wn):
    """A tiny BERT imported as the docs import one (model.pt, dict.txt, vocab.txt), its WordNet
    synonym table and a raw text file."""
    from corpus_fixtures import tiny_corpus_lines
    from hf_fixtures import save_bert, wordpiece_vocab

    from truneg_fairseq.convert import hf as hf_convert
    from truneg_fairseq.lexicon import build_table, vocab_view

    root = tmp_path_factory.mktemp("doc_commands_hf")
    save_bert(root / "bert_hf", vocab=wordpiece_vocab())
    bert = hf_convert.import_hf(root / "bert_hf", root / "bert")
    table, _ = build_table(vocab_view(bert / "dict.txt", "whitespace"), source="wordnet", wn=wn)
    table.save(bert / "synonyms.npz")
    (root / "valid.raw").write_text("\n".join(tiny_corpus_lines(40, seed=5)) + "\n")
    return {"dir": bert, "table": bert / "synonyms.npz", "text": root / "valid.raw"}


# fairseq-validate's flags without a value
VALIDATE_SWITCHES = {"--cpu", "--fp16", "--bf16", "--quiet"}


@pytest.mark.parametrize("command", _select("validate"))
def test_fairseq_validate_runs_as_written(command, trained, data_bin, synonym_table, tmp_path):
    args, i, argv = command.argv[1:], 0, []
    while i < len(args):
        a = args[i]
        if a.startswith("--") and a not in VALIDATE_SWITCHES and i + 1 < len(args):
            value = {
                "--path": str(trained),
                "--user-dir": str(REPO / "truneg_fairseq"),
                "--synonym-table": str(synonym_table),
            }.get(a, args[i + 1])
            argv += [a, value]
            i += 2
            continue
        argv.append(a if a.startswith("--") else str(data_bin))
        i += 1
    bin_dir = os.path.dirname(sys.executable)
    proc = subprocess.run(
        [os.path.join(bin_dir, "fairseq-validate"), *argv, "--cpu"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{command.where}: {' '.join(command.argv)}\n{out[-3000:]}"
    assert "valid on 'valid' subset" in out and "pred_corr_ratio" in out


@pytest.mark.parametrize("command", _select("evaluate"))
def test_evaluate_runs_as_written(
    command, trained, imported, data_bin, synonym_table, tmp_path, monkeypatch, capsys
):
    from truneg_fairseq.cli.evaluate_mlm import get_parser

    parser = get_parser()
    takes_value = {
        s for a in parser._actions if a.option_strings and a.nargs != 0 for s in a.option_strings
    }
    args = [_expand(a) for a in _args(command)]
    text = "--text" in args
    paths = {
        "--data": str(data_bin),
        "--text": str(imported["text"]),
        "--synonym-table": str(imported["table"] if text else synonym_table),
        "--vocab": str(imported["dir"] / "vocab.txt"),
        "--table-md": str(tmp_path / "table.md"),
        "--table-json": str(tmp_path / "table.json"),
    }
    argv, i = [], 0
    while i < len(args):
        a = args[i]
        if a in takes_value:
            argv += [a, paths.get(a, args[i + 1])]
            i += 2
            continue
        argv.append(a if a.startswith("-") else str(imported["dir"] if text else trained))
        i += 1
    from truneg_fairseq.cli.evaluate_mlm import main

    monkeypatch.chdir(tmp_path)  # relative outputs as written land here
    try:
        code = main([*argv, "--device", "cpu"])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    assert code == 0, f"{command.where}: {' '.join(command.argv)}\n{out.err[-3000:]}"
    assert "MLM acc" in out.out or out.out.lstrip().startswith("{"), out.out[-2000:]


# ---- command lines checked without their data -------------------------------------------------------
@pytest.mark.parametrize("command", _select("fairseq-train", "fairseq-hydra-train"))
def test_fairseq_train_flags_exist(command):
    if command.program == "fairseq-hydra-train":
        _check_hydra(command)
        return
    from fairseq import options

    import truneg_fairseq

    truneg_fairseq.register()
    args = [_expand(a) for a in command.argv[1:] if a != "..."]
    args = [a.replace('"', "") for a in args]
    with registry_kept():  # a --user-dir's objectives leave with the test
        parser = options.get_training_parser()
        _, unknown = options.parse_args_and_arch(parser, args, parse_known=True)
    unknown = [a for a in unknown if a.startswith("-")]
    assert not unknown, f"{command.where}: fairseq-train has no {unknown}"


def _check_hydra(command):
    from omegaconf import OmegaConf

    args = command.argv[1:]
    conf_dir = _expand(args[args.index("--config-dir") + 1])
    name = args[args.index("--config-name") + 1]
    path = Path(conf_dir if os.path.isabs(conf_dir) else REPO / conf_dir) / f"{name}.yaml"
    assert path.is_file(), f"{command.where}: no config {path}"
    cfg = OmegaConf.load(path)
    for a in args:
        m = re.match(r"^(\w+)\.(\w+)=", a)
        if m:
            group, key = m.groups()
            declared = group in cfg and key in cfg[group].keys()  # ??? (required) included
            assert declared, f"{command.where}: {name} has no {group}.{key}"


def _positionals(script: Path) -> int:
    """How many arguments a recipe reads before its pass-through flags (``${N:?...}``,
    ``${N:-...}``, ``$N``)."""
    text = script.read_text(encoding="utf-8")
    found = [int(n) for n in re.findall(r"\$\{?(\d)(?![0-9])", text)]
    return max(found, default=0)


RECIPE_HELPERS = sorted((REPO / "examples").glob("*.sh"))


@pytest.mark.parametrize("command", _select("recipe"))
def test_recipe_invocation_matches_the_recipe(command):
    script = REPO / command.argv[1].replace("$PWD/", "")
    assert script.is_file(), f"{command.where}: no {command.argv[1]}"
    args = [a for a in command.argv[2:] if a != "..."]
    leading = []
    for a in args:
        if a.startswith("-"):
            break
        leading.append(a)
    assert len(leading) <= _positionals(script), f"{command.where}: {script.name} reads fewer"
    known = set().union(*(READ.findall(p.read_text()) for p in [script, *RECIPE_HELPERS]))
    known |= {"OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES"}
    unknown = set(command.env) - known
    assert not unknown, f"{command.where}: {script.name} does not read {unknown}"


@pytest.mark.parametrize("command", _select("make"))
def test_make_target_exists(command):
    makefile = (REPO / "Makefile").read_text()
    for target in (a for a in command.argv[1:] if not ENV.match(a) and not a.startswith("-")):
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{command.where}: {target}"


@pytest.mark.parametrize("command", _select("benchmark"))
def test_benchmark_exists(command):
    assert (REPO / _script(command)).is_file(), command.where
