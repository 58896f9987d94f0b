#!/usr/bin/env python
"""Evaluate masked-LM checkpoints on a binarized split: MLM loss (bits/token, as fairseq logs
it), accuracy, and the paper's false-negative statistics (synonym-aware accuracy, prediction-
and iteration-level ratios, the iteration level over 512-token units, the share of content-word
predictions, in %) when a synonym table is given; the definitions are in docs/criterions.md and
the numbers are those fairseq's valid log gives on the same masks. Masks are seeded, so checkpoints are compared on the same
masked positions. The blocks are those of the checkpoint's task (--tokens-per-sample,
--sample-break-mode); --long-lines decides what happens to blocks longer than the model's
positions: skip (default) leaves them out and logs how many, break cuts the split into blocks of
at most the model's size.

With --text FILE instead of --data, runs on raw text (one sequence per non-empty line, e.g.
wikitext-2's valid split) tokenized with the model's WordPiece vocabulary (vocab.txt beside the
checkpoint, as `convert_hf.py import` writes it, or --vocab; another --tokenizer with its file for
other models): no training run or binarization is needed. In both modes a directory written by
the import stands for its model.pt, and --show N prints up to N Figure-3-style cases (masked
sentence, gold, prediction, the gold's synonym list; one per distinct gold/prediction pair), or
one line saying that there is none.

Examples:
  python scripts/evaluate_mlm.py --data data-bin --synonym-table data-bin/synonyms.npz \\
      ckpt/masked_lm/checkpoint_last.pt ckpt/hc/checkpoint_last.pt
  python scripts/evaluate_mlm.py --text wikitext-2-raw/wiki.valid.raw \\
      --synonym-table imported/bert-base/synonyms.npz --show 5 imported/bert-base
"""

import argparse
import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli.common import count_arg, fail, setup_logging  # noqa: E402
from truneg_fairseq.text import add_tokenizer_args  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "checkpoints",
        nargs="+",
        help="checkpoint files, or directories written by convert_hf.py import",
    )
    p.add_argument("--data", help="data-bin directory (dict.txt + binarized splits)")
    p.add_argument("--text", help="raw text file, one sequence per line (instead of --data)")
    add_tokenizer_args(
        p, default="wordpiece"
    )  # --text: --vocab defaults to the vocab.txt beside the checkpoint
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    p.add_argument(
        "--show",
        type=count_arg,
        default=0,
        metavar="N",
        help="print up to N Figure-3 cases (needs --synonym-table)",
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
        help="--data (default skip): blocks longer than the model's positions are left out "
        "(skip, counted in the log) or the split is cut into blocks of at most the "
        "model's size (break)",
    )
    p.add_argument("--synonym-table", help="table for the correction statistics (optional)")
    p.add_argument("--subset", default="valid")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-batches", type=int, default=0, help="0: the whole split")
    p.add_argument("--seed", type=int, default=1, help="masking seed (same for every checkpoint)")
    p.add_argument(
        "--json", action="store_true", help="print one JSON object per checkpoint (cases included)"
    )
    args = p.parse_args(argv)
    setup_logging("truneg_fairseq.evaluate_mlm")
    from truneg_fairseq.checkpoints import CheckpointError, describe_load_error
    from truneg_fairseq.lexicon.synonyms import SynonymTableError
    from truneg_fairseq.pipelines.evaluate_mlm import (
        evaluate_mlm,
        evaluate_text,
        resolve_checkpoint,
    )

    if bool(args.data) == bool(args.text):
        fail("give exactly one of --data (binarized split) or --text (raw text file)")
    if args.text and os.path.isdir(args.text):
        fail(f"--text {args.text} is a directory: give the raw text file (one sequence per line)")
    if args.text and not os.path.isfile(args.text):
        fail(f"--text {args.text} not found")
    if args.text and args.long_lines:
        fail(
            "--long-lines applies to --data; with --text every line is one sequence, cut at --max-len ids"
        )
    if args.show and not args.synonym_table:
        fail(
            "--show needs --synonym-table (the cases are predictions that are synonyms of the gold)"
        )
    for flag, path in (("--synonym-table", args.synonym_table), ("--vocab", args.vocab)):
        if path and not os.path.isfile(path):
            fail(f"{flag} {path} not found")
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
            path = resolve_checkpoint(ck)
        except CheckpointError as e:
            fail(str(e))
        if not os.path.isfile(path):
            fail(f"checkpoint {ck} not found")
        cases = []
        try:
            if args.text:
                scored = evaluate_text(
                    path,
                    args.text,
                    args.synonym_table,
                    device,
                    args.batch_size,
                    args.max_len,
                    args.mask_prob,
                    args.seed,
                    args.max_lines,
                    args.show,
                    args.vocab,
                    tokenizer=tokenizer,
                    cases=cases,
                )
            else:
                scored = evaluate_mlm(
                    path,
                    args.data,
                    args.synonym_table,
                    args.subset,
                    args.batch_size,
                    args.max_batches,
                    args.seed,
                    args.long_lines or "skip",
                    args.show,
                    cases,
                    device,
                )
        except (CheckpointError, SynonymTableError) as e:
            fail(str(e))
        except (
            Exception
        ) as e:  # a truncated file, another dictionary: said in words, naming the file
            msg = describe_load_error(ck, e, args.data)
            if msg is None:
                raise
            fail(msg)
        res = {k: v for k, v in scored.report.as_dict().items() if v is not None}
        if args.json:
            extra = {
                "cases": [
                    {k: v for k, v in dataclasses.asdict(c).items() if k != "checkpoint"}
                    for c in cases
                ]
            }
            extra = extra if args.show else {}
            print(json.dumps({"checkpoint": ck, **res, "counts": scored.counts.as_dict(), **extra}))
            continue
        print(
            f"{ck}: "
            + " | ".join(
                f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in res.items()
            )
        )
        for number, case in enumerate(cases, 1):
            print(case.format(number))
        if args.show and not cases:
            print(
                f"no synonym prediction among the {res['masked']} masked word positions: nothing to show"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
