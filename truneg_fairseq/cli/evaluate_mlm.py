"""Evaluate masked-LM checkpoints on a binarized split: MLM loss (bits/token, as fairseq logs
it), accuracy, and the paper's false-negative statistics (synonym-aware accuracy, prediction-
and iteration-level ratios, the iteration level over 512-token units, the share of content-word
predictions, in %) when a synonym table is given; the definitions are in docs/criterions.md and
the numbers are those fairseq's valid log gives on the same masks.

Several checkpoints are scored side by side on the same masks and the same block size (the
smallest max positions among them, said in the output) and printed as ONE table, a row per
checkpoint; --table-md and --table-json write it as Markdown and JSON. The blocks are those of
the (first) checkpoint's task (--tokens-per-sample, --sample-break-mode); --long-lines decides
what happens to blocks longer than the block size: skip (default) leaves them out and logs how
many, break cuts the split into blocks of at most that size. A progress line (fairseq's log
format) comes every --progress-seconds while a checkpoint is scored.

With --text FILE instead of --data, runs on raw text (one sequence per non-empty line, e.g.
wikitext-2's valid split) tokenized with the model's WordPiece vocabulary (vocab.txt beside the
checkpoint, as `convert_hf.py import` writes it, or --vocab; another --tokenizer with its file for
other models): no training run or binarization is needed. In both modes a directory written by
the import stands for its model.pt, and --show N prints up to N Figure-3-style cases (masked
sentence, gold, prediction, the gold's synonym list; one per distinct gold/prediction pair), or
one line saying that there is none.

Examples:
  python scripts/evaluate_mlm.py --data data-bin --synonym-table data-bin/synonyms.npz \\
      --table-md table.md ckpt/masked_lm/checkpoint_last.pt ckpt/hc/checkpoint_last.pt
  python scripts/evaluate_mlm.py --text wikitext-2-raw/wiki.valid.raw \\
      --synonym-table imported/bert-base/synonyms.npz --show 5 imported/bert-base
"""

import argparse
import dataclasses
import json
import os

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.common import (
    TOKENIZER_FILE_FLAGS,
    add_checkpoint_args,
    count_arg,
    fail,
    flag_inputs,
    interruptible,
    refuse_inputs_as_outputs,
    resolve_checkpoint_args,
    setup_logging,
    write_output,
)
from truneg_fairseq.text import add_tokenizer_args


def _check_given(parser, args) -> None:
    """What must be on the command line, checked before fairseq and torch are imported."""
    if not (args.checkpoints or args._checkpoint_flag):
        parser.error("give at least one checkpoint (.pt)")
    if bool(args.data) == bool(args.text):
        fail("give exactly one of --data (binarized split) or --text (raw text file)")


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__, check=_check_given)
    add_checkpoint_args(
        p, several=True, help="checkpoint files, or directories written by convert_hf.py import"
    )
    p.add_argument("--data", help="data-bin directory (dict.txt + binarized splits)")
    p.add_argument("--text", help="raw text file, one sequence per line (instead of --data)")
    # --text: --vocab defaults to the vocab.txt beside the checkpoint
    add_tokenizer_args(p, default="wordpiece")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    p.add_argument(
        "--show",
        type=count_arg,
        default=0,
        metavar="N",
        help="print up to N Figure-3 cases per checkpoint (needs --synonym-table)",
    )
    p.add_argument("--mask-prob", type=float, default=0.15, help="--text: share of entries masked")
    p.add_argument(
        "--max-len", type=int, default=128, help="--text: ids per sequence (longer lines are cut)"
    )
    p.add_argument("--max-lines", type=int, default=0, help="--text: 0: every line")
    p.add_argument(
        "--long-lines",
        choices=["skip", "break"],
        default=None,
        help="--data (default skip): blocks longer than the block size are left out "
        "(skip, counted in the log) or the split is cut into blocks of at most that size (break)",
    )
    p.add_argument("--synonym-table", help="table for the correction statistics (optional)")
    p.add_argument("--subset", default="valid")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-batches", type=int, default=0, help="0: the whole split")
    p.add_argument("--seed", type=int, default=1, help="masking seed (same for every checkpoint)")
    p.add_argument(
        "--progress-seconds",
        type=float,
        default=10.0,
        metavar="S",
        help="a progress line at most every S seconds while scoring (default 10; 0: every batch)",
    )
    p.add_argument("--table-md", metavar="PATH", help="also write the table as Markdown")
    p.add_argument("--table-json", metavar="PATH", help="also write the table as JSON")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per checkpoint (cases included) instead of the table",
    )
    return p


def _check_args(args) -> None:
    if bool(args.data) == bool(args.text):
        fail("give exactly one of --data (binarized split) or --text (raw text file)")
    if args.text and os.path.isdir(args.text):
        fail(f"--text {args.text} is a directory: give the raw text file (one sequence per line)")
    if args.text and not os.path.isfile(args.text):
        fail(f"--text {args.text} not found")
    if args.text and args.long_lines:
        fail(
            "--long-lines applies to --data; with --text every line is one sequence, cut at "
            "--max-len ids"
        )
    if args.show and not args.synonym_table:
        fail(
            "--show needs --synonym-table (the cases are predictions that are synonyms of the gold)"
        )
    for flag, path in (("--synonym-table", args.synonym_table), ("--vocab", args.vocab)):
        if path and not os.path.isfile(path):
            fail(f"{flag} {path} not found")
    for flag, path in (("--table-md", args.table_md), ("--table-json", args.table_json)):
        if path and os.path.isdir(path):
            fail(f"{flag} {path} is a directory: give a file name")


def _inputs(args) -> list:
    """(flag, file) of what the run reads: the checkpoints (an imported directory's files), the
    data directory's dictionary, split and tokenizer record, the text, table and tokenizer
    files."""
    from truneg_fairseq.outputs import files_in, split_files

    found = []
    for ck in args.checkpoints:
        if os.path.isdir(ck):
            found += [
                ("checkpoint", p) for p in files_in(ck, ["model.pt", "dict.txt", "vocab.txt"])
            ]
        else:
            found.append(("checkpoint", ck))
            if args.text:  # the WordPiece vocabulary beside it
                found += [("checkpoint", p) for p in files_in(os.path.dirname(ck), ["vocab.txt"])]
    names = ["dict.txt", "tokenizer_fingerprint.json"]
    found += [
        ("--data", p) for p in files_in(args.data, names) + split_files(args.data, args.subset)
    ]
    return found + flag_inputs(args, ("--text", "--synonym-table", *TOKENIZER_FILE_FLAGS))


def _values(scored) -> dict:
    return {k: v for k, v in scored.report.as_dict().items() if v is not None}


def _summary(ck: str, res: dict) -> str:
    return f"{ck}: " + " | ".join(
        f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in res.items()
    )


@interruptible
def main(argv=None) -> int:
    parser = get_parser()
    args = resolve_checkpoint_args(parser, parser.parse_args(argv), several=True)
    log = setup_logging("truneg_fairseq.evaluate_mlm")
    _check_args(args)
    outputs = {"--table-md": args.table_md, "--table-json": args.table_json}
    refuse_inputs_as_outputs(outputs, _inputs(args))
    from truneg_fairseq.checkpoints import CheckpointError, describe_load_error
    from truneg_fairseq.errors import CorpusError
    from truneg_fairseq.lexicon.synonyms import SynonymTableError
    from truneg_fairseq.pipelines.evaluate_mlm import EvalConfig, compare, resolve_checkpoint

    tokenizer = None  # default: WordPiece over the vocab.txt beside each checkpoint
    if args.text and (args.tokenizer != "wordpiece" or args.vocab):
        from truneg_fairseq.text import TokenizerError, tokenizer_from_args

        try:
            tokenizer = tokenizer_from_args(args)
        except TokenizerError as e:
            fail(str(e))
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"--device {device}: no CUDA device here; use --device cpu")
    for ck in args.checkpoints:
        try:
            if not os.path.isfile(resolve_checkpoint(ck)):
                fail(f"checkpoint {ck} not found")
        except CheckpointError as e:
            fail(str(e))
    config = EvalConfig(
        synonym_table=args.synonym_table,
        device=device,
        batch_size=args.batch_size,
        seed=args.seed,
        show=args.show,
        progress_seconds=args.progress_seconds,
        subset=args.subset,
        max_batches=args.max_batches,
        long_lines=args.long_lines or "skip",
        max_len=args.max_len,
        mask_prob=args.mask_prob,
        max_lines=args.max_lines,
        vocab=args.vocab,
    )
    try:
        result = compare(args.checkpoints, args.data, args.text, config, tokenizer)
    except (CheckpointError, SynonymTableError, CorpusError) as e:
        fail(str(e))
    except Exception as e:  # a truncated file, another dictionary: said in words, naming the file
        msg = next(
            (m for ck in args.checkpoints if (m := describe_load_error(ck, e, args.data))), None
        )
        if msg is None:
            raise
        fail(msg)
    for ck, scored in zip(result.checkpoints, result.scored):
        log.info(_summary(ck, _values(scored)))
    if args.table_md:
        write_output("--table-md", args.table_md, lambda f: f.write(result.markdown()))
    if args.table_json:
        write_output(
            "--table-json", args.table_json, lambda f: json.dump(result.as_json(), f, indent=1)
        )
    if args.json:
        for ck, scored in zip(result.checkpoints, result.scored):
            extra = {}
            if args.show:
                extra["cases"] = [
                    {k: v for k, v in dataclasses.asdict(c).items() if k != "checkpoint"}
                    for c in scored.cases
                ]
            res = _values(scored)
            print(json.dumps({"checkpoint": ck, **res, "counts": scored.counts.as_dict(), **extra}))
        return 0
    print(result.text())
    for ck, scored in zip(result.checkpoints, result.scored):
        if not args.show:
            continue
        print(f"\nFigure-3 cases of {ck}:")
        for number, case in enumerate(scored.cases, 1):
            print(case.format(number))
        if not scored.cases:
            print(
                f"no synonym prediction among the {scored.counts.masked} masked word positions: "
                "nothing to show"
            )
    return 0
