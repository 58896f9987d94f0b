"""Argument helpers several commands share (beyond :mod:`truneg_fairseq.cli.common`): the
parser of a command described by its module docstring, the study's ``--jobs`` flag, and
parsing a command line whose ``--dict`` is required."""

import argparse

from truneg_fairseq.cli.common import check_required_dict, count_arg


def command_parser(doc: str) -> argparse.ArgumentParser:
    """The parser of a command whose ``--help`` shows ``doc`` (its module docstring) as written."""
    return argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
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
