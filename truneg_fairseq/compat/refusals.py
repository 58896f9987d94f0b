"""The plugin's refusals met inside fairseq's commands end in one line (``one_line_refusals``).

fairseq-train, fairseq-hydra-train and fairseq-validate let every exception end the process
with a traceback, and the plugin refuses bad input from inside them: a data-bin whose ``.idx``
does not describe its ``.bin``, a synonym table that cannot be used (unreadable, of another
dictionary, of 0 pairs where the objective needs pairs), flags a criterion, task or model cannot
train with, a checkpoint that cannot be resumed. Each such error already names the file or flag
and the fix; the traceback above it only hides that line.

A *refusal* is an exception of a class the plugin defines (every one of them,
:class:`~truneg_fairseq.errors.FlagError`, ``SynonymTableError``, ``DataIndexError``,
``CheckpointError``, ``ModelValueError`` ..., is raised with a message that says what to do). A
refusal raised in one of these commands is written to stderr as one line in fairseq's log format
(``<time> | ERROR | fairseq_cli.train | <message>``), and the command exits with status 1. Any
other exception (Python's, torch's, fairseq's own) is a fault, not a refusal: it is re-raised
untouched and prints its whole traceback as before.

Refusals are caught where all three commands run their ``main``: fairseq's
``distributed_utils.call_main`` (also when a test runs a command in-process), and its
``distributed_main`` in each worker that ``torch.multiprocessing.spawn`` starts (the worker says
the line and exits with :data:`WORKER_REFUSED`, which the parent turns into status 1 without the
launcher's traceback). fairseq-hydra-train imports the plugin only once its ``call_main`` runs:
there the refusal is said where hydra reads the failed job's result. A refusal met before
``call_main`` (fairseq-train's argument conversion: ``--bf16`` with ``--amp``) reaches the
interpreter: the excepthook says it the same way in a process whose main program is a fairseq
command, and leaves every other program's errors alone.

Ctrl-C (SIGINT) in these commands ended in a ``KeyboardInterrupt`` traceback and the signal's
exit status; it is said as the package's own commands say it, one line on stderr
(:data:`INTERRUPTED`), with exit status 130 (the shell's 128 + SIGINT), in the same places: the
``call_main`` of the command, each spawned worker (quietly: the parent says it), and the
excepthook of a fairseq command's process. Checkpoints are written atomically with the plugin, so
an interrupted save leaves no partial file.

Upstream: fairseq 0.12.2 (the last release); no upstream issue is known, and fairseq 0.12 gets no
more releases.
"""

from __future__ import annotations

import logging
import os
import sys

LOG_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"  # fairseq's
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
WORKER_REFUSED = 3  # exit status of a spawned worker that said a refusal
INTERRUPTED = "interrupted (Ctrl-C): nothing partial was written"  # as the package's commands
INTERRUPTED_STATUS = 130

_original = {}  # fairseq's call_main and distributed_main, kept when replaced
_inside_call_main = 0  # > 0 while call_main runs in this process (it says the refusal)


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is one of the plugin's refusals: an instance of a class the package
    defines (see the module docstring)."""
    return type(exc).__module__.split(".")[0] == "truneg_fairseq"


def refusal_line(exc: BaseException, name: str) -> str:
    """``exc``'s message as one ERROR line of fairseq's log, from logger ``name``. A refusal
    that torch's ``DataLoader`` raised again from a worker process (``--num-workers``) carries the
    worker's traceback in its message: its last line, the refusal's own, is said."""
    message = str(exc)
    if "\nOriginal Traceback (most recent call last):\n" in message:
        last = message.rstrip().rsplit("\n", 1)[-1]
        message = last.split(": ", 1)[1] if last.startswith(type(exc).__module__) else last
    message = " ".join(message.split("\n"))
    record = logging.LogRecord(name, logging.ERROR, "", 0, message, None, None)
    return logging.Formatter(LOG_FORMAT, DATE_FORMAT).format(record)


def say_refusal(exc: BaseException, name: str) -> None:
    print(refusal_line(exc, name), file=sys.stderr, flush=True)


def _command(main) -> str:
    """The logger name of the command running ``main`` (fairseq_cli.train ...)."""
    name = getattr(main, "__module__", None)
    if name in (None, "__main__"):  # python -m fairseq_cli.train
        name = fairseq_command() or "fairseq_cli"
    return name


def fairseq_command():
    """The module of the fairseq command this process runs (``fairseq_cli.train`` for
    ``fairseq-train`` or ``python -m fairseq_cli.train``), or None for any other program."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None) or ""
    if name.startswith("fairseq_cli."):
        return name
    base = os.path.basename(sys.argv[0]) if sys.argv else ""
    if base.startswith("fairseq-"):
        return "fairseq_cli." + base[len("fairseq-") :].replace("-", "_")
    return None


def call_main(cfg, main, **kwargs):
    """fairseq's ``call_main``, its refusals said in one line (status 1)."""
    from torch.multiprocessing import ProcessExitedException

    global _inside_call_main
    _inside_call_main += 1
    try:
        return _original["call_main"](cfg, main, **kwargs)
    except KeyboardInterrupt:
        say_interrupted()
        raise SystemExit(INTERRUPTED_STATUS) from None
    except ProcessExitedException as e:
        if e.exit_code == INTERRUPTED_STATUS:  # a worker stopped by Ctrl-C
            say_interrupted()
            raise SystemExit(INTERRUPTED_STATUS) from None
        if e.exit_code != WORKER_REFUSED:
            raise
        raise SystemExit(1) from None  # the worker said why
    except Exception as e:
        if not is_refusal(e):
            raise
        say_refusal(e, _command(main))
        raise SystemExit(1) from None
    finally:
        _inside_call_main -= 1


def distributed_main(i, main, cfg, kwargs):
    """fairseq's ``distributed_main``; in a spawned worker a refusal is said there (the parent's
    ``call_main`` runs in another process) and the worker exits with :data:`WORKER_REFUSED`."""
    if _inside_call_main:  # this process's call_main says it
        return _original["distributed_main"](i, main, cfg, kwargs)
    try:
        return _original["distributed_main"](i, main, cfg, kwargs)
    except KeyboardInterrupt:
        raise SystemExit(INTERRUPTED_STATUS) from None  # the parent says it
    except Exception as e:
        if not is_refusal(e):
            raise
        say_refusal(e, _command(main))
        raise SystemExit(WORKER_REFUSED) from None


def say_interrupted() -> None:
    print(INTERRUPTED, file=sys.stderr, flush=True)


def excepthook(exc_type, exc, tb):
    name = fairseq_command()
    if name is not None and issubclass(exc_type, KeyboardInterrupt):
        # met before call_main (the plugin's import, the arguments): the interpreter would end
        # with the signal's status; the one line is said and the status is 130
        say_interrupted()
        sys.stdout.flush()
        os._exit(INTERRUPTED_STATUS)
    if name is not None and is_refusal(exc):
        say_refusal(exc, name)
        return
    if name is not None and _no_task(exc, tb):
        command = "fairseq-" + name.rsplit(".", 1)[-1].replace("_", "-")
        print(refusal_line(RuntimeError(NO_TASK.format(command=command)), name), file=sys.stderr)
        sys.stderr.flush()
        os._exit(2)  # an argument error, as argparse's
    _original["excepthook"](exc_type, exc, tb)


NO_TASK = (
    "{command}: no --task given; give the task the checkpoint was trained with (the recipes' "
    "RoBERTa and BERT: --task batch_masked_lm; ELECTRA: --task electra; CLINE: --task cline; "
    "fairseq's own: --task masked_lm): fairseq reads the task's arguments before it opens the "
    "checkpoint"
)


def _no_task(exc: BaseException, tb) -> bool:
    """Whether ``exc`` is fairseq's ``KeyError: None`` of a command line without ``--task``
    (``parse_args_and_arch`` looks the task up in its registry before anything else)."""
    if not isinstance(exc, KeyError) or exc.args != (None,):
        return False
    last = tb
    while last is not None and last.tb_next is not None:
        last = last.tb_next
    code = last.tb_frame.f_code if last is not None else None
    return code is not None and code.co_name == "parse_args_and_arch"


excepthook.truneg_refusals = True


def _hydra_job_result() -> None:
    """fairseq-hydra-train imports the plugin inside fairseq-train's ``main``, which its
    ``call_main`` already runs: a refusal there reaches hydra, which keeps it as the job's result
    and raises it again when the result is read (printing its own traceback). The result read as
    a refusal is said in one line instead (status 1)."""
    from hydra.core.utils import JobReturn, JobStatus

    prop = JobReturn.return_value
    if getattr(prop.fget, "truneg_refusals", False):
        return

    def return_value(self):
        exc = self._return_value
        if self.status == JobStatus.FAILED and is_refusal(exc):
            say_refusal(exc, fairseq_command() or "fairseq_cli.hydra_train")
            raise SystemExit(1)
        return prop.fget(self)

    return_value.truneg_refusals = True
    JobReturn.return_value = prop.getter(return_value)


def one_line_refusals() -> None:
    """Say the plugin's refusals inside fairseq's commands in one line (see the module
    docstring)."""
    from fairseq.distributed import utils as distributed_utils

    _hydra_job_result()

    if not getattr(distributed_utils.call_main, "truneg_refusals", False):
        _original["call_main"] = distributed_utils.call_main
        _original["distributed_main"] = distributed_utils.distributed_main
        distributed_utils.call_main = call_main
        distributed_utils.distributed_main = distributed_main
    if not getattr(sys.excepthook, "truneg_refusals", False):
        _original["excepthook"] = sys.excepthook
        sys.excepthook = excepthook


call_main.truneg_refusals = True
