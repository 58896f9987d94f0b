"""The full help of a ``fairseq-train`` command line, task/model/criterion flags included.

fairseq 0.12 prints ``--help`` during its first parse, before it adds the flags of the chosen
task, architecture, criterion, optimizer and scheduler, so ``fairseq-train ... --help`` never
lists them. This builds the parser exactly as ``fairseq-train`` does for the given choices and
returns its help: every flag once, with the owner prefix the plugin gives its own.
"""

import argparse
import os
import sys
from typing import Sequence

from truneg_fairseq.cli.common import interruptible


def training_parser(argv: Sequence[str]):
    """The argparse parser fairseq-train builds for ``argv`` (DATA may be omitted), the plugin
    registered first (``--user-dir truneg_fairseq`` names a package imported already, which
    fairseq does not import again)."""
    from fairseq import options

    import truneg_fairseq

    truneg_fairseq.register()
    argv = _with_data(argv)
    parser = options.get_training_parser()
    options.parse_args_and_arch(parser, list(argv), parse_known=True)
    return parser


def _with_data(argv: Sequence[str]) -> list:
    """``argv`` without ``--help``, with a placeholder DATA where none leads it."""
    argv = [a for a in argv if a not in ("-h", "--help")]
    return argv if argv and not argv[0].startswith("-") else ["DATA", *argv]


def training_help(argv: Sequence[str]) -> str:
    return training_parser(argv).format_help()


HELP = """Print every flag a fairseq-train command line accepts, including those of its task, model
and criterion (``fairseq-train --help`` stops before adding them).
"""

EPILOG = """Any other flag of the fairseq-train command line (DATA, --lr, a plugin's flags) may follow:
it is checked against the flags of that task, model and criterion.

Example:
  truneg-train-help --user-dir truneg_fairseq --task electra --arch electra_small \\
      --criterion mlm_hard_correction
"""


def choices_parser():
    """The flags that decide which flags a fairseq-train command line has (its task, model,
    criterion, optimizer, scheduler and plugin folder), read before fairseq is imported so that
    a command line without a model is one usage line at once."""
    p = argparse.ArgumentParser(
        prog="truneg-train-help",
        description=HELP,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument(
        "--arch",
        "-a",
        required=True,
        help="the model whose flags to list (e.g. roberta_base, electra_small)",
    )
    p.add_argument("--user-dir", help="a plugin folder (e.g. truneg_fairseq)")
    p.add_argument("--task", help="the task whose flags to add (e.g. masked_lm, electra)")
    p.add_argument("--criterion", help="the criterion whose flags to add")
    p.add_argument("--optimizer", help="the optimizer whose flags to add")
    p.add_argument("--lr-scheduler", help="the learning-rate scheduler whose flags to add")
    return p


def _check_choices(chooser, argv) -> None:
    """Refuse at once, before fairseq is imported, a command line without a model: the flags
    it names that are not the chooser's are named too (which fairseq-train flags exist depends
    on the model, so they are checked once --arch is given)."""
    if any(a in ("-a", "--arch") or a.startswith(("-a=", "--arch=")) for a in argv):
        chooser.parse_known_args(argv)  # a malformed --arch: argparse's own message
        return
    optional = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for action in chooser._actions:
        if action.option_strings and action.dest not in ("help", "arch"):
            optional.add_argument(*action.option_strings, dest=action.dest)
    unknown = [a for a in optional.parse_known_args(argv)[1] if a.startswith("-")]
    if unknown:
        chooser.error(
            f"unrecognized arguments: {' '.join(unknown)} (a fairseq-train command line's flags "
            "depend on its model: with --arch ARCH they are checked against them); the "
            "following arguments are required: --arch/-a"
        )
    chooser.error("the following arguments are required: --arch/-a")


@interruptible
def main(argv=None) -> int:
    """``truneg-train-help FAIRSEQ-TRAIN FLAGS``: the full help of that command line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    chooser = choices_parser()
    if argv in ([], ["-h"], ["--help"]):
        chooser.print_help()
        return 0
    _check_choices(chooser, [a for a in argv if a not in ("-h", "--help")])
    argv = _package_user_dir(argv)
    saved = sys.argv
    sys.argv = [saved[0] if saved else "truneg-train-help", *argv]  # fairseq reads --user-dir there
    try:
        try:
            parser = training_parser(argv)  # imports fairseq and any --user-dir
        except RuntimeError as e:  # fairseq 0.12's bare answer to an --arch it does not know
            if str(e):
                raise
            arch = chooser.parse_known_args(argv)[0].arch
            chooser.error(
                f"argument --arch/-a: unknown architecture {arch!r} (fairseq-train --help lists "
                "them; a plugin's need --user-dir)"
            )
        # a second DATA where the command line has its own is no flag: left out
        unknown = [a for a in parser.parse_known_args(_with_data(argv))[1] if a.startswith("-")]
        if unknown:
            chooser.error(
                f"unrecognized arguments: {' '.join(unknown)} (not flags of fairseq-train with "
                "this task, model and criterion)"
            )
        print(parser.format_help())
    finally:
        sys.argv = saved
    return 0


def _package_user_dir(argv):
    """``--user-dir truneg_fairseq`` run outside the checkout: the installed package's folder."""
    import truneg_fairseq

    out = list(argv)
    for i, a in enumerate(out[:-1]):
        if a == "--user-dir" and out[i + 1] == "truneg_fairseq" and not os.path.isdir(out[i + 1]):
            out[i + 1] = os.path.dirname(os.path.abspath(truneg_fairseq.__file__))
    return out
