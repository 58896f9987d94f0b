"""Continue a local HuggingFace masked-LM checkpoint (BERT, RoBERTa, ELECTRA, ...) on text with
hard correction, soft regularization, sentence-level KL or plain MLM, with transformers' Trainer.

  MODEL_DIR: a local save_pretrained directory with its tokenizer (a hub id is not downloaded:
  see docs/hf.md, "A model directory, offline", for making one); with
  --generator GEN_DIR it is an ELECTRA discriminator and GEN_DIR its generator (ELECTRA
  pre-training, the objective applied to the generator's masked-LM term).
  --train / --valid: text files (.gz/.bz2/.xz too) or folders of .txt files, one example per
  non-empty line, or a directory written by datasets' save_to_disk; tokenized once into
  memory-mapped Arrow under --cache-dir and read from there by later runs and every process
  (--streaming: --train read and tokenized as training goes, nothing converted).

Writes OUTPUT_DIR/checkpoint-N every --save-steps (each loads with from_pretrained; running the
same command again resumes from the last one, with the same settings; once --max-steps is reached
it does nothing), OUTPUT_DIR/synonyms.npz (the WordNet synonym table of the tokenizer's
vocabulary, built on the first run), tensorboard logs in OUTPUT_DIR/runs, and the final model in
OUTPUT_DIR (ELECTRA: OUTPUT_DIR/discriminator and OUTPUT_DIR/generator). OUTPUT_DIR is new, empty,
or an earlier run of this command (never one holding an input); one run at a time writes it. The
log reports transformers' loss (nats per masked token) and the fairseq plugin's statistics:
loss_bits, mlm_loss_bits, corrected_loss_bits / sr_loss_bits / kl_loss_bits / disc_loss_bits (bits
per masked token, fairseq's unit), mlm_acc, syn_acc, pred_corr_ratio, iter_corr_ratio, ...

Several processes: torchrun --nproc_per_node K $(which truneg-hf-train) ... (--batch-size is per
process; with --cpu they talk over gloo).

Examples:
  truneg-hf-train bert-base-uncased --train wiki.txt --output-dir runs/bert-hc
  truneg-hf-train electra-small-discriminator --generator electra-small-generator \\
      --train texts/ --objective soft_reg --output-dir runs/electra-sr --max-steps 20000
  truneg-hf-train bert-base-uncased --build-synonyms bert-synonyms.npz
"""

import argparse
import os
import sys
from pathlib import Path

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import (
    fail,
    interruptible,
    refuse_inputs_as_outputs,
    setup_logging,
)
from truneg_fairseq.core import objectives
from truneg_fairseq.core.objectives.electra_rtd import RTD_PARAMS

# the files of a save_pretrained directory (model, configuration, tokenizer) a run reads
HF_FILES = (
    "config.json",
    "model.safetensors",
    "pytorch_model.bin",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
)


def _read(args) -> list:
    """(flag, file) of what a training run reads: the model's (and generator's) files, the
    text (a folder's .txt files) and the synonym table."""
    from truneg_fairseq.outputs import files_in

    found = [("MODEL_DIR", p) for p in files_in(args.model_dir, HF_FILES)]
    found += [("--generator", p) for p in files_in(args.generator, HF_FILES)]
    for flag in ("--train", "--valid"):
        for path in getattr(args, flag[2:]) or [None]:
            if path and os.path.isdir(path):
                found += [(flag, p) for p in files_in(path, sorted(os.listdir(path)))]
            else:
                found.append((flag, path))
    return found + [("--synonym-table", args.synonym_table)]


def _written(args) -> list:
    """(flag, file) of the files a training run writes into --output-dir (the final model, its
    tokenizer and arguments, and the synonym table it builds when none is given)."""
    # the table is built and kept when none is given and no earlier run kept one (which is then
    # read back, not written)
    kept = os.path.isfile(os.path.join(args.output_dir, "synonyms.npz"))
    names = ["training_args.bin"] + ([] if args.synonym_table or kept else ["synonyms.npz"])
    # ELECTRA: the discriminator and the generator, each in its own directory
    models = ["discriminator", "generator"] if args.generator else [""]
    names += [os.path.join(m, n) if m else n for m in models for n in HF_FILES]
    return [("--output-dir", os.path.join(args.output_dir, n)) for n in names]


def build_parser():
    """The command's parser; ``--objective``'s choices and the objectives' flags are the
    registered objectives' (:mod:`truneg_fairseq.core.objectives`, which imports no torch), those
    of ``--user-dir`` included when :func:`main` imported it first."""
    # MODEL_DIR and --generator checked as soon as the line is parsed, before torch or
    # transformers is imported; fairseq is never needed here
    p = command_parser(
        __doc__, check=_check_objective_flags, inputs=_check_model_dirs, register=False
    )
    p.add_argument("model_dir", metavar="MODEL_DIR", help="local HuggingFace model directory")
    p.add_argument(
        "--train",
        nargs="+",
        metavar="TEXT",
        help="training text: files (.gz/.bz2/.xz too), folders of .txt files, or a directory "
        "written by datasets' save_to_disk",
    )
    p.add_argument(
        "--valid",
        nargs="+",
        metavar="TEXT",
        help="validation text (as --train), evaluated every --eval-steps and at the end",
    )
    p.add_argument("--output-dir", help="checkpoints, logs and the final model")
    p.add_argument("--generator", metavar="GEN_DIR", help="ELECTRA: the generator's directory")
    p.add_argument(
        "--objective",
        choices=objectives.names(),
        default="hard_correction",
        help="the objective (default hard_correction); electra needs --generator",
    )
    p.add_argument(
        "--user-dir",
        metavar="DIR",
        help="a package directory (or .py file) of your own objectives, imported first as "
        "fairseq-train --user-dir imports it: its objectives and their flags join the others "
        "(docs/objectives.md)",
    )
    p.add_argument(
        "--synonym-table",
        help="a table built for this tokenizer (default: built from WordNet on the first run)",
    )
    p.add_argument(
        "--build-synonyms", metavar="FILE", help="only build the tokenizer's synonym table"
    )
    g = p.add_argument_group("training")
    g.add_argument("--max-steps", type=int, default=1000, help="updates (default 1000)")
    g.add_argument("--batch-size", type=int, default=8, help="sequences per process and step")
    g.add_argument("--grad-accum", type=int, default=1, help="micro-batches per update")
    g.add_argument("--lr", type=float, default=5e-5)
    g.add_argument("--warmup-steps", type=int, default=0)
    g.add_argument("--weight-decay", type=float, default=0.01)
    g.add_argument("--max-grad-norm", type=float, default=1.0)
    g.add_argument("--seq-len", type=int, default=128, help="tokens per example (longer cut)")
    g.add_argument("--mask-prob", type=float, default=0.15)
    g.add_argument(
        "--leave-unmasked-prob",
        type=float,
        help="share of the selected tokens kept (default 0.1; ELECTRA 0.15)",
    )
    g.add_argument(
        "--random-token-prob",
        type=float,
        help="share of the selected tokens replaced at random (default 0.1; ELECTRA 0)",
    )
    g.add_argument("--max-predictions", type=int, help="static slots per row (default: ELECTRA's)")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--save-steps", type=int, default=500, help="a checkpoint every N updates")
    g.add_argument("--save-total-limit", type=int, help="keep the last N checkpoints")
    g.add_argument("--log-steps", type=int, default=10, help="statistics every N updates")
    g.add_argument("--eval-steps", type=int, help="evaluate --valid every N updates")
    g.add_argument("--no-resume", dest="resume", action="store_false", help="start afresh")
    g.add_argument("--cpu", action="store_true", help="train on the CPU (gloo between processes)")
    g.add_argument("--report-to", default="tensorboard", help="tensorboard (default) or none")
    g.add_argument("--workers", type=int, default=0, help="data-loader worker processes")
    g.add_argument(
        "--allow-fresh-head",
        action="store_true",
        help="continue an encoder without a masked-LM head (e.g. a published BertModel) or "
        "a checkpoint lacking head weights: a new head, initialised as transformers does",
    )
    d = p.add_argument_group("data")
    d.add_argument(
        "--cache-dir",
        help="where the tokenized text is kept (default: datasets' cache, $HF_DATASETS_CACHE)",
    )
    d.add_argument(
        "--preprocessing-workers",
        type=int,
        metavar="N",
        help="processes that tokenize the text the first time (default: the cores, up to 8)",
    )
    d.add_argument(
        "--streaming",
        action="store_true",
        help="read and tokenize --train as training goes: nothing converted or cached, lines in "
        "file order (docs/hf.md says what else it gives up)",
    )
    o = p.add_argument_group("objectives' parameters (each for the objective it names)")
    for entry, param in objectives.all_params():
        # None when not given: a flag of another objective than --objective's is refused
        _add_param(o, param, f"{entry.name}: ", None)
    for param in RTD_PARAMS:
        _add_param(o, param, "", param.default)
    return p


def _add_param(group, param, owner: str, default) -> None:
    """The flag of an objective's parameter (:class:`truneg_fairseq.core.objectives.Param`)."""
    text = f"{owner}{param.help} (default {param.default})"
    if param.type is bool:
        action = "store_true" if param.default is False else argparse.BooleanOptionalAction
        group.add_argument(param.flag, dest=param.name, action=action, default=default, help=text)
    else:
        group.add_argument(
            param.flag,
            dest=param.name,
            type=param.type,
            choices=param.choices,
            default=default,
            metavar=None if param.choices else param.type.__name__.upper(),
            help=text,
        )


def objective_params(args) -> dict:
    """The parameters of ``args.objective`` given on the command line, by name."""
    entry = objectives.get(args.objective)
    return {
        p.name: getattr(args, p.name) for p in entry.params if getattr(args, p.name) is not None
    }


def _check_objective_flags(parser, args) -> None:
    """A flag of another objective's parameter is a usage error (it would change nothing)."""
    mine = {p.name for p in objectives.get(args.objective).params}
    for entry, param in objectives.all_params():
        if param.name not in mine and getattr(args, param.name) is not None:
            parser.error(
                f"{param.flag} is a parameter of --objective {entry.name}; --objective "
                f"{args.objective} has none such: drop it or give --objective {entry.name}"
            )
    if objectives.get(args.objective).needs_discriminator and not args.generator:
        parser.error(
            f"--objective {args.objective} needs an ELECTRA pair: MODEL_DIR the discriminator "
            "and --generator GEN_DIR"
        )


def user_dir_first(argv) -> None:
    """Import the ``--user-dir`` of ``argv`` (the command line when None) before the parser is
    built, so that its objectives are choices and their parameters flags."""
    argv = sys.argv[1:] if argv is None else list(argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--user-dir")
    given, _ = pre.parse_known_args(argv)
    if given.user_dir:
        try:
            objectives.import_user_dir(given.user_dir)
        except objectives.ObjectiveError as e:
            fail(str(e))


def _check_model_dirs(args) -> None:
    """MODEL_DIR and GEN_DIR refused at once, before torch, transformers or any model is loaded:
    a hub id (nothing is downloaded), a folder without config.json (an ELECTRA run's output
    folder: its discriminator/ and generator/ named), a WordPiece vocabulary without '##'
    pieces, a model without a masked-LM head unless --allow-fresh-head."""
    from truneg_fairseq.errors import HFTrainError
    from truneg_fairseq.hf.loading import check_architecture, local_model_dir

    try:
        for flag, path in (("MODEL_DIR", args.model_dir), ("--generator", args.generator)):
            if path:
                local_model_dir(path, flag)
        fresh = args.allow_fresh_head or bool(args.build_synonyms)  # a table needs no head
        check_architecture(Path(args.model_dir), args.generator, fresh)
    except HFTrainError as e:
        fail(str(e))


@interruptible
def main(argv=None) -> int:
    user_dir_first(argv)
    p = build_parser()
    args = p.parse_args(argv)  # MODEL_DIR and --generator checked (_check_model_dirs)
    log = setup_logging("truneg_fairseq.hf_train")
    log.info(f"loading torch, transformers and the model of {args.model_dir}")

    from transformers.utils import logging as hf_logging

    if not sys.stderr.isatty():
        hf_logging.disable_progress_bar()  # no progress bars in a log file
    from truneg_fairseq.errors import OutputDirError, SynonymTableError
    from truneg_fairseq.lexicon import WordNetNotFoundError
    from truneg_fairseq.pipelines.hf_train import HFTrainConfig, HFTrainError, load_models, run

    if args.build_synonyms:
        from truneg_fairseq.outputs import files_in

        inputs = [("MODEL_DIR", p) for p in files_in(args.model_dir, HF_FILES)]
        refuse_inputs_as_outputs({"--build-synonyms": args.build_synonyms}, inputs)
    elif args.output_dir:
        refuse_inputs_as_outputs(_written(args), _read(args))
    try:
        if args.build_synonyms:
            from truneg_fairseq.hf.tokenizer_tables import build_synonym_table

            cfg = HFTrainConfig(args.model_dir, "", "", allow_fresh_head=True)
            tok, _, _ = load_models(cfg)
            table, _ = build_synonym_table(tok)
            table.save(args.build_synonyms)
            log.info(f"wrote {args.build_synonyms} ({len(table)} pairs)")
            return 0
        if not args.train or not args.output_dir:
            p.error("--train and --output-dir are required (or --build-synonyms FILE)")
        params = {p.name for _, p in objectives.all_params()}
        fields = {k: v for k, v in vars(args).items() if k != "build_synonyms" and k not in params}
        run(HFTrainConfig(**fields, objective_params=objective_params(args)))
    except (HFTrainError, SynonymTableError, WordNetNotFoundError, OutputDirError) as e:
        fail(str(e))
    return 0
