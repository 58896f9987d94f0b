"""The full help of a ``fairseq-train`` command line, task/model/criterion flags included.

fairseq 0.12 prints ``--help`` during its first parse, before it adds the flags of the chosen
task, architecture, criterion, optimizer and scheduler, so ``fairseq-train ... --help`` never
lists them. This builds the parser exactly as ``fairseq-train`` does for the given choices and
returns its help: every flag once, with the owner prefix the plugin gives its own.
"""

from typing import Sequence

from fairseq import options


def training_parser(argv: Sequence[str]):
    """The argparse parser fairseq-train builds for ``argv`` (DATA may be omitted)."""
    argv = [a for a in argv if a not in ("-h", "--help")]
    if not argv or argv[0].startswith("-"):
        argv = ["DATA", *argv]
    parser = options.get_training_parser()
    options.parse_args_and_arch(parser, list(argv), parse_known=True)
    return parser


def training_help(argv: Sequence[str]) -> str:
    return training_parser(argv).format_help()
