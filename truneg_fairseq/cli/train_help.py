"""The full help of a ``fairseq-train`` command line, task/model/criterion flags included.

fairseq 0.12 prints ``--help`` during its first parse, before it adds the flags of the chosen
task, architecture, criterion, optimizer and scheduler, so ``fairseq-train ... --help`` never
lists them. This builds the parser exactly as ``fairseq-train`` does for the given choices and
returns its help: every flag once, with the owner prefix the plugin gives its own.
"""

from typing import Sequence

from truneg_fairseq.cli.common import interruptible


def training_parser(argv: Sequence[str]):
    """The argparse parser fairseq-train builds for ``argv`` (DATA may be omitted), the plugin
    registered first (``--user-dir truneg_fairseq`` names a package imported already, which
    fairseq does not import again)."""
    from fairseq import options

    import truneg_fairseq

    truneg_fairseq.register()
    argv = [a for a in argv if a not in ("-h", "--help")]
    if not argv or argv[0].startswith("-"):
        argv = ["DATA", *argv]
    parser = options.get_training_parser()
    options.parse_args_and_arch(parser, list(argv), parse_known=True)
    return parser


def training_help(argv: Sequence[str]) -> str:
    return training_parser(argv).format_help()


HELP = """Print every flag a fairseq-train command line accepts, including those of its task, model
and criterion (``fairseq-train --help`` stops before adding them).

Example:
  truneg-train-help --user-dir truneg_fairseq --task electra --arch electra_small \\
      --criterion mlm_hard_correction
"""


@interruptible
def main(argv=None) -> int:
    """``truneg-train-help FAIRSEQ-TRAIN FLAGS``: the full help of that command line."""
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in ([], ["-h"], ["--help"]):
        print(HELP)
        return 0
    argv = _package_user_dir(argv)
    saved = sys.argv
    sys.argv = [saved[0] if saved else "truneg-train-help", *argv]  # fairseq reads --user-dir there
    try:
        print(training_help(argv))
    finally:
        sys.argv = saved
    return 0


def _package_user_dir(argv):
    """``--user-dir truneg_fairseq`` run outside the checkout: the installed package's folder."""
    import os

    import truneg_fairseq

    out = list(argv)
    for i, a in enumerate(out[:-1]):
        if a == "--user-dir" and out[i + 1] == "truneg_fairseq" and not os.path.isdir(out[i + 1]):
            out[i + 1] = os.path.dirname(os.path.abspath(truneg_fairseq.__file__))
    return out
