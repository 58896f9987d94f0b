"""truneg-fairseq: counter-false-negative masked-LM pre-training as a fairseq ``--user-dir`` plugin.

Where things are (docs/architecture.md has every module):

* the step (hard correction, soft regularization, sentence KL, ELECTRA's RTD term) and its
  statistics, framework-free: ``core/``;
* the fairseq front end: ``criterions/`` (``--criterion mlm_hard_correction`` ...), ``models/``,
  ``tasks/``, ``optim/``; the engine inside fairseq-train: ``training/``; fairseq mends: ``compat/``;
* the HuggingFace front end (``truneg-hf-train``, no fairseq needed): ``hf/``;
* ELECTRA: ``models/electra*.py``, ``tasks/electra.py``; CLINE: ``*/cline*.py`` (docs/cline.md);
  GLUE: ``data/glue*.py``, ``pipelines/glue_run_config.py``, ``pipelines/glue.py``; SQuAD:
  ``*/squad*.py``;
* WordNet and synonym tables: ``lexicon/``; tokenizers: ``text/``; corpora and data sets:
  ``data/``; scores of trained models: ``evaluation/``; HF conversion: ``convert/``;
* the commands: ``cli/`` (argument parsing) over ``pipelines/`` (the work); errors: ``errors.py``.

Importing the package registers it with fairseq (:func:`register`), where fairseq is installed
(without it, :mod:`truneg_fairseq.core` and :mod:`truneg_fairseq.hf` work alone): the mends of
:mod:`truneg_fairseq.compat` are installed, then the criterions, models, architectures, tasks,
the ``fused_adamw`` optimizer and the ``wordpiece`` BPE are registered and ``masked_lm``'s
whole-word mask is mended. fairseq imports the package by directory name
(``--user-dir truneg_fairseq``) and auto-imports only ``tasks/`` and ``models/``, so everything
is imported here; ``import truneg_fairseq`` in a session or a script does the same.

One kind of process waits: one whose program is one of the package's own commands (a
``truneg-*`` console command of :data:`COMMANDS`, a wrapper ``<name>.py`` that imports ``main``
of ``truneg_fairseq.cli.<name>`` as those of the checkout's ``scripts/`` do, or
``python -m truneg_fairseq.cli.<name>``), told from the interpreter's own command line
(``sys.orig_argv``: nothing in the process rewrites it, and a worker that multiprocessing starts
has its own). Importing fairseq and torch takes seconds, and a command's ``--help`` or a usage
error needs neither: the commands' modules import only the standard library and fairseq-free
parts of the package at module level, and every command registers the plugin as soon as its
command line is parsed (:class:`truneg_fairseq.cli.args.CommandParser`), so everything past
parsing runs as it does after ``import truneg_fairseq``. Whether the plugin is registered never
rests on that reading of the command line alone: in a process that waits, the import of fairseq
itself registers it (:class:`_RegisterAfterFairseq`), so a script that looks like a command (its
name, or a ``main`` it imports) and uses fairseq before that ``main`` runs meets a registered
fairseq with every mend in place, and a process where fairseq is imported already registers at
once. Waiting only ever spares the import of fairseq, never a mend. The package's own paths into fairseq
above the layers the registration imports (the conversions' model builder, the SQuAD and CLINE
loaders of ``pipelines/``, the study's scoring workers, ``truneg-train-help``'s parser) call
:func:`register` themselves too: whatever imported the package first, they never run on an
unregistered fairseq. Anything this does not recognise as a command registers at once.

:func:`register` does its work once per process: a second call, or a second
``compat.install()``, changes nothing. The package imported under another name (``--user-dir``
given a symbolic link or a copy of another name: fairseq imports the directory's basename) is
the same package, registered once (:func:`_under_another_name`).
"""

import importlib
import importlib.util
import os
import re
import sys
import warnings
from typing import Optional, Sequence

__version__ = "0.1.0"

# the console commands of pyproject.toml's [project.scripts] (tests/test_lazy_root.py checks
# that the two agree; a command missing here still works, it only registers at once)
COMMANDS = (
    "truneg-build-synonyms",
    "truneg-cline-hits",
    "truneg-convert-hf",
    "truneg-demo",
    "truneg-evaluate",
    "truneg-glue-predict",
    "truneg-glue-table",
    "truneg-hf-train",
    "truneg-make-cline-data",
    "truneg-perturb",
    "truneg-plot-run",
    "truneg-prepare-corpus",
    "truneg-prepare-glue",
    "truneg-robustness-report",
    "truneg-squad-eval",
    "truneg-squad-predict",
    "truneg-study",
    "truneg-train-help",
    "truneg-word-vectors",
)

_registered = False


def register() -> None:
    """Register the plugin with fairseq and install its mends, once per process: what importing
    the package does in every process but the package's own commands (module docstring)."""
    global _registered
    if _registered:
        return

    # fairseq 0.12 scripts functions with torch.jit.script when it is imported; torch 2.13
    # deprecates that call, which says nothing to a user of the plugin
    warnings.filterwarnings(
        "ignore", message=r"`torch\.jit\.script` is deprecated", category=DeprecationWarning
    )
    from . import compat, training

    compat.install()
    training.install()
    from . import criterions, models, optim, tasks  # noqa: F401  (registration)
    from .text import fairseq_bpe, give_masked_lm_whole_words  # noqa: F401  (``wordpiece`` BPE)

    # the one mend outside compat/: it needs the tokenizer layer above compat (compat/__init__.py)
    give_masked_lm_whole_words()
    _registered = True


def _program(argv: Sequence[str]):
    """What an interpreter command line runs: ``("module", name)`` for ``-m name``,
    ``("file", path)`` for a script, ``(None, None)`` for ``-c``, stdin or a line this does not
    read (the options of ``python --help`` that take a value are skipped)."""
    args = iter(argv[1:])
    for a in args:
        if a in ("-W", "-X", "--check-hash-based-pycs"):
            next(args, None)
        elif a.startswith("-m"):
            return "module", a[2:] or next(args, "")
        elif a.startswith("-c") or a == "-":
            return None, None
        elif not a.startswith("-"):
            return "file", a
    return None, None


def started_as_command(argv: Optional[Sequence[str]] = None) -> bool:
    """Whether the interpreter command line ``argv`` (default: this process's,
    ``sys.orig_argv``) runs one of the package's commands (module docstring). Anything else,
    an unknown or missing command line included, is not one."""
    argv = getattr(sys, "orig_argv", None) if argv is None else argv
    if not argv:
        return False
    kind, what = _program(argv)
    if kind == "module":
        return what.startswith(__name__ + ".cli.")
    if kind != "file":
        return False
    name = os.path.basename(what)
    name = name[: -len(".exe")] if name.endswith(".exe") else name
    if name in COMMANDS:
        return True
    return _is_wrapper(what)


def _is_wrapper(path: str) -> bool:
    """Whether the script ``path`` is a wrapper of a command module ``truneg_fairseq.cli.<name>``
    (the checkout's scripts folder, ``examples/study/run_study.py``, or a copy): it imports that
    module's ``main``."""
    here = os.path.dirname(os.path.abspath(__file__))
    if not path.endswith(".py"):
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return False
    return any(
        name not in ("__init__", "args", "common")
        and os.path.isfile(os.path.join(here, "cli", name + ".py"))
        for name in re.findall(rf"^from {__name__}\.cli\.(\w+) import main\b", text, re.M)
    )


def fairseq_installed() -> bool:
    """Whether fairseq can be found in this environment. Without it the package is the
    framework-free core and the HuggingFace front end (:mod:`truneg_fairseq.core`,
    :mod:`truneg_fairseq.hf`), and nothing registers; with it, a broken fairseq fails loudly
    at registration."""
    try:
        return importlib.util.find_spec("fairseq") is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
        return False


def _under_another_name(name: str) -> None:
    """This package imported as module ``name`` (``fairseq-train --user-dir DIR`` imports DIR's
    basename: a symbolic link or a copy of another name): the package's one ``truneg_fairseq``
    (imported now from this directory, unless imported already) is registered, and ``name`` and
    its submodules become that package and its submodules, so that nothing is imported or
    registered twice (fairseq's own import of ``name.tasks.*`` and ``name.models.*`` included)."""
    package = __package_name__
    real = sys.modules.get(package)
    if real is None:
        here = os.path.dirname(os.path.realpath(__file__))
        spec = importlib.util.spec_from_file_location(
            package, os.path.join(here, "__init__.py"), submodule_search_locations=[here]
        )
        real = importlib.util.module_from_spec(spec)
        sys.modules[package] = real
        try:
            spec.loader.exec_module(real)
        except BaseException:
            del sys.modules[package]
            raise
    real.register()
    for key, module in list(sys.modules.items()):
        if key == package or key.startswith(package + "."):
            sys.modules.setdefault(name + key[len(package) :], module)
    sys.meta_path.insert(0, _Alias(name, package))  # what is imported later
    sys.modules[name] = real


class _Alias:
    """A finder that gives module ``alias.X`` as the module ``package.X`` (imported once)."""

    def __init__(self, alias: str, package: str):
        self.alias, self.package = alias, package

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(self.alias + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module(self.package + spec.name[len(self.alias) :])

    def exec_module(self, module):
        pass  # run once, under the package's name


__package_name__ = "truneg_fairseq"


class _RegisterAfterFairseq:
    """A finder for the module ``fairseq`` only, in a command's process while it waits: fairseq
    is found by the other finders and runs as usual, and the plugin registers as soon as it has
    run, whoever imported it (the command past its parsing, or a script's own code before the
    command's ``main``): no code of the process ever meets an unregistered fairseq. It removes
    itself at its first use."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "fairseq":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            register()

        spec.loader.exec_module = exec_module  # this spec's own loader object
        return spec


def _register_when_fairseq_is_imported() -> None:
    """Register now if fairseq is imported already, else at its import (a command's process)."""
    if "fairseq" in sys.modules:
        register()
    elif not any(isinstance(f, _RegisterAfterFairseq) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterFairseq())


if __name__ != __package_name__:
    _under_another_name(__name__)
elif fairseq_installed():
    if started_as_command():
        _register_when_fairseq_is_imported()
    else:
        register()
