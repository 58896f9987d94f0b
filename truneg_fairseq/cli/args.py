"""Argument helpers several commands share (beyond :mod:`truneg_fairseq.cli.common`): the
parser of a command described by its module docstring (which registers the plugin once the
command line is parsed), the study's ``--jobs`` flag, and parsing a command line whose
``--dict`` is required."""

import argparse
import signal
import threading

from truneg_fairseq.cli.common import check_required_dict, count_arg
from truneg_fairseq.cli.threads import set_threads_if_unset


class CommandParser(argparse.ArgumentParser):
    """The parser of every command: a command line :meth:`parse_args` accepted (``--help`` and
    usage errors end before) leaves the plugin registered with fairseq
    (:func:`truneg_fairseq.register`, a no-op where importing the package did it), so that what
    the command does next runs as it does after ``import truneg_fairseq``. A command's process
    imports the package without registering it, so that ``--help`` and a mistyped flag need
    neither fairseq nor torch (the package root's docstring). ``check(parser, args)``, when
    given, runs before that, so that a command line missing what argparse cannot require (one of
    two flags, say) is refused at once too. An unset ``OMP_NUM_THREADS`` is chosen then too
    (:mod:`truneg_fairseq.cli.threads`). A command that never uses fairseq (the HuggingFace
    front end's) gives ``register=False``: its bad input is refused without fairseq's import.
    ``inputs(args)``, when given, checks the files the line names (it exits with one error) right
    after ``check``, before anything heavy is imported."""

    def __init__(self, *args, check=None, register=True, inputs=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.check = check
        self.register = register
        self.inputs = inputs

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        if self.check is not None:
            self.check(self, parsed)
        if self.inputs is not None:
            self.inputs(parsed)
        set_threads_if_unset()  # before torch is imported
        if self.register:
            _register_whole()
        return parsed


def _register_whole() -> None:
    """:func:`truneg_fairseq.register`, with a Ctrl-C that arrives during its imports taken after
    them: an import broken off halfway leaves a module half made (numpy's, say), which fails
    later in ways that have nothing to do with the interrupt."""
    import truneg_fairseq

    if not truneg_fairseq.fairseq_installed():
        return  # the HF front end's commands run without fairseq; the others fail on import
    if threading.current_thread() is not threading.main_thread():
        truneg_fairseq.register()
        return
    pending = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        truneg_fairseq.register()
    finally:
        signal.signal(signal.SIGINT, previous)
    if pending:
        raise KeyboardInterrupt


def command_parser(doc: str, check=None, register: bool = True, inputs=None) -> CommandParser:
    """The parser of a command whose ``--help`` shows ``doc`` (its module docstring) as written;
    ``check``, ``register`` and ``inputs``: :class:`CommandParser`'s."""
    return CommandParser(
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        check=check,
        register=register,
        inputs=inputs,
    )


def add_jobs_arg(parser: argparse.ArgumentParser) -> None:
    """``--jobs``: trainings and scorings run side by side (the demo and the study)."""
    parser.add_argument(
        "--jobs",
        type=count_arg,
        default=0,
        help="trainings and scorings run side by side (default 0: one per CPU core; on a GPU "
        "one at a time)",
    )


def parse_with_dict(parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """``argv`` parsed by ``parser``; a missing ``--dict`` is the parser's usage error."""
    args = parser.parse_args(argv)
    check_required_dict(parser, args)
    return args
