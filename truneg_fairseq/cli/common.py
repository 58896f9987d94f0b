"""Shared helpers for the thin CLIs in scripts/."""

import argparse
import functools
import logging
import os
import sys
import warnings

# hydra 1.3's notices for the calls fairseq 0.12 makes when it composes a config from arguments
# (hydra.experimental's initialize/compose, no version_base, the "_group_" package header of
# fairseq's config files, schema matching by name, compose's strict flag): about fifteen lines on
# stderr per command that nothing here can act on. The plugin's commands leave them out of their
# own output; fairseq's commands (fairseq-train, ...) print them as they always have.
HYDRA_NOTICES = (
    r"\s*hydra\.experimental\.(initialize|compose)\(\) is no longer experimental",
    r"\s*The version_base parameter is not specified",
    r"\s*In '[^']*': Usage of deprecated keyword in package header",
    r"\s*'[^']*' is validated against ConfigStore schema with the same name",
    r"\s*The strict flag in the compose API is deprecated",
)


def setup_logging(name: str) -> logging.Logger:
    """Log to stdout in fairseq's format (hydra's :data:`HYDRA_NOTICES` left out)."""
    for message in HYDRA_NOTICES:
        warnings.filterwarnings("ignore", message=message, category=UserWarning)
    logging.basicConfig(
        format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        level=os.environ.get("LOGLEVEL", "INFO").upper(),
        stream=sys.stdout,
        force=True,
    )
    return logging.getLogger(name)


def hydra_train(argv) -> None:
    """fairseq-hydra-train with the arguments ``argv``, as a recipe runs it: hydra 1.3's
    :data:`HYDRA_NOTICES` and its working-directory notice left out, and fairseq's own
    ``logging.basicConfig(level=DEBUG)`` (made at import by one of its models) undone, so
    hydra's set-up does not print ``DEBUG:hydra`` lines before the run's logging starts."""
    notices = HYDRA_NOTICES + (r"\s*Future Hydra versions will no longer change working directory",)
    for message in notices:
        warnings.filterwarnings("ignore", message=message, category=UserWarning)
    from fairseq_cli import hydra_train as fairseq_hydra_train

    logging.getLogger().setLevel(os.environ.get("LOGLEVEL", "INFO").upper())
    sys.argv = ["fairseq-hydra-train", *argv]
    fairseq_hydra_train.cli_main()


def interruptible(main):
    """``main`` of a command, with Ctrl-C (SIGINT) said in one line and exit status 130 (the
    shell's 128 + SIGINT) instead of a KeyboardInterrupt traceback; outputs are written
    atomically, so an interrupted command leaves no partial file. Every file the command reads
    is compared with its outputs as it is read (:mod:`truneg_fairseq.outputs.inputs`): one that
    is an output is one error line, nothing written."""
    from truneg_fairseq.outputs import InputAsOutputError, begin_run, end_run

    @functools.wraps(main)
    def run(argv=None) -> int:
        begin_run()  # the files it reads are compared with its outputs (outputs/inputs.py)
        try:
            return main(argv)
        except KeyboardInterrupt:
            print("interrupted (Ctrl-C): nothing partial was written", file=sys.stderr)
            return 130
        except InputAsOutputError as e:  # an output found to be an input as the run read it
            fail(str(e))
        finally:
            end_run()

    return run


def fail(msg: str, code: int = 2) -> "NoReturn":  # noqa: F821
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(code)


def count_arg(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return n


def _renamed_flag_action(new_flag: str):
    """An argparse action for a flag kept under an old name: it stores into the new name's dest
    and says which name to use from now on."""

    class Renamed(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            print(
                f"note: {option_string} is now {new_flag}; the old name still works",
                file=sys.stderr,
            )
            setattr(namespace, self.dest, values)

    return Renamed


def add_renamed_flag(parser, old_flag: str, new_flag: str, dest: str, **kwargs) -> None:
    """Accept ``old_flag`` as an alias of ``new_flag`` (same ``dest``), hidden from ``--help``."""
    parser.add_argument(
        old_flag, dest=dest, action=_renamed_flag_action(new_flag), help=argparse.SUPPRESS, **kwargs
    )


def add_dict_flag(parser, required: bool = True, help: str = "fairseq dict.txt") -> None:
    """``--dict``: the one name for a fairseq dictionary in every command (``--srcdict`` kept)."""
    parser.add_argument("--dict", dest="dict", required=False, default=None, help=help)
    add_renamed_flag(parser, "--srcdict", "--dict", dest="dict")
    parser.set_defaults(_dict_required=required)


def check_required_dict(parser, args) -> None:
    """argparse cannot require one of two spellings: call after parse_args."""
    if getattr(args, "_dict_required", False) and not args.dict:
        parser.error("the following arguments are required: --dict")


def add_checkpoint_args(parser, several: bool = False, help: str = "fairseq checkpoint (.pt)"):
    """Checkpoints are positional in every command; ``--checkpoint PATH`` is kept as an alias."""
    parser.add_argument(
        "checkpoints" if several else "checkpoint", nargs="*" if several else "?", help=help
    )
    parser.add_argument(
        "--checkpoint",
        dest="_checkpoint_flag",
        action="append",
        default=None,
        help=_suppress(),
    )


def _suppress():
    return argparse.SUPPRESS


def resolve_checkpoint_args(parser, args, several: bool = False):
    """Merge ``--checkpoint`` into the positional; error when none was given."""
    flagged = getattr(args, "_checkpoint_flag", None) or []
    if flagged:
        print(
            "note: --checkpoint is now a positional argument; the old form still works",
            file=sys.stderr,
        )
    if several:
        args.checkpoints = list(args.checkpoints or []) + flagged
        if not args.checkpoints:
            parser.error("give at least one checkpoint (.pt)")
    else:
        given = ([args.checkpoint] if args.checkpoint else []) + flagged
        if len(given) != 1:
            parser.error("give exactly one checkpoint (.pt)")
        args.checkpoint = given[0]
    return args


def refuse_inputs_as_outputs(outputs, inputs) -> None:
    """An output flag that names one of the run's input files (a link to one included) is one
    error naming both flags and the file, before anything is read or written
    (:func:`truneg_fairseq.outputs.refuse_inputs_as_outputs`). The outputs are declared for the
    rest of the run: an input found later, as the run reads it (the data directory a checkpoint
    records, a dictionary beside it), is compared with them too
    (:func:`truneg_fairseq.outputs.reading`)."""
    from truneg_fairseq.outputs import OutputDirError, declare_outputs, refuse_read_outputs
    from truneg_fairseq.outputs import refuse_inputs_as_outputs as refuse

    try:
        refuse(outputs, inputs)
        refuse_read_outputs(outputs)
    except OutputDirError as e:
        fail(str(e))
    declare_outputs(outputs)


def write_output(flag: str, path, write, mode: str = "w", **kwargs) -> None:
    """``write(f)`` into output ``path`` (of ``flag``) atomically; a full disk, a quota or a
    directory that cannot be written is one error naming the flag and the file, and leaves no
    file behind (the earlier ``path`` stays as it was)."""
    from truneg_fairseq.outputs import (
        OutputDirError,
        atomic_open,
        refuse_read_outputs,
        write_errors,
    )

    try:
        refuse_read_outputs({flag: path})  # one of the files the run read (outputs/inputs.py)
    except OutputDirError as e:
        fail(str(e))
    try:
        with write_errors(path), atomic_open(path, mode, **kwargs) as f:
            write(f)
    except OutputDirError as e:
        fail(f"{flag} {e}")


TOKENIZER_FILE_FLAGS = ("--spm-model", "--gpt2-encoder-json", "--gpt2-vocab-bpe", "--vocab")


def flag_inputs(args, flags=TOKENIZER_FILE_FLAGS) -> list:
    """(flag, path) of the given input ``flags`` of ``args`` (default: the tokenizer's files)."""
    return [(f, getattr(args, f[2:].replace("-", "_"), None)) for f in flags]
