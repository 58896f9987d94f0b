"""What the commands that run checkpoints share (truneg-glue-predict, truneg-squad-predict,
truneg-cline-hits): the command line parsed, which registers the plugin, with the checkpoints
given as the positional (``--checkpoint`` kept as an alias, :func:`common.add_checkpoint_args`);
logging set up; a checkpoint file that is not there refused; the checkpoints compared with the
run's outputs among its other inputs; and a checkpoint that cannot be loaded said in one line
(``error: MESSAGE``, exit status 2).

Standard library and the fairseq-free parts of the package only at module level, so that a
command's ``--help`` stays fast."""

import argparse
import contextlib
import os
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from truneg_fairseq.cli.common import (
    fail,
    refuse_inputs_as_outputs,
    resolve_checkpoint_args,
    setup_logging,
)


def parse_checkpoint_command(
    parser: argparse.ArgumentParser,
    argv,
    logger_name: str,
    several: bool = False,
    must_exist: bool = False,
) -> argparse.Namespace:
    """``parser``'s arguments of ``argv`` with the checkpoint resolved (``args.checkpoint``, or
    the list ``args.checkpoints`` when ``several``; none given is a usage error), then logging
    set up under ``logger_name``. ``must_exist``: a checkpoint that is not a file is one error,
    before anything is loaded."""
    args = resolve_checkpoint_args(parser, parser.parse_args(argv), several=several)
    setup_logging(logger_name)
    if must_exist:
        for ck in checkpoints_of(args):
            if not os.path.isfile(ck):
                fail(f"checkpoint {ck} not found")
    return args


def checkpoints_of(args: argparse.Namespace) -> List[str]:
    """The checkpoints of a command line :func:`parse_checkpoint_command` parsed."""
    several = getattr(args, "checkpoints", None)
    return list(several) if several is not None else [args.checkpoint]


def refuse_checkpoint_outputs(
    args: argparse.Namespace,
    outputs: Dict[str, Optional[str]],
    inputs: Iterable[Tuple[str, Optional[str]]] = (),
) -> None:
    """:func:`common.refuse_inputs_as_outputs` for the run's ``outputs`` ({flag: path}) and its
    inputs: the checkpoints first, then ``inputs`` ((flag, path) of the other files it reads)."""
    found = [("checkpoint", ck) for ck in checkpoints_of(args)]
    refuse_inputs_as_outputs(outputs, found + list(inputs))


@contextlib.contextmanager
def checkpoint_errors(*also: type) -> Iterator[None]:
    """Inside: a checkpoint that cannot be used (``CheckpointError``), or an error of one of the
    types ``also``, ends the command with its message in one line (exit status 2)."""
    from truneg_fairseq.errors import CheckpointError

    try:
        yield
    except (CheckpointError, *also) as e:
        fail(str(e))
