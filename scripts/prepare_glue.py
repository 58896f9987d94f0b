#!/usr/bin/env python
"""Prepare GLUE tasks for fine-tuning with fairseq's sentence_prediction task.

Reads the official task folders (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE) under
--glue-dir, tokenizes with the pre-training tokenizer and binarizes with the pre-training
dict.txt into OUT/TASK/{input0,input1,label}. MNLI's dev_matched/dev_mismatched become the
valid/valid1 subsets. Malformed rows (wrong column count, empty field, unknown label) are
skipped and counted per reason; too many of them are an error (--max-skip-fraction).

Example:
  python scripts/prepare_glue.py --glue-dir glue_data --output-dir glue-bin \\
      --dict work/data-bin/dict.txt --tokenizer sentencepiece --spm-model work/spm.model
  python scripts/prepare_glue.py --glue-dir glue_data --output-dir glue-bin-bert \\
      --dict imported/bert-base-uncased/dict.txt --tokenizer wordpiece --vocab imported/bert-base-uncased/vocab.txt
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli.common import fail, setup_logging  # noqa: E402
from truneg_fairseq.io_utils import OutputDirError  # noqa: E402
from truneg_fairseq.text import add_tokenizer_args  # noqa: E402


def main(argv=None) -> int:
    from truneg_fairseq.data.glue import MAX_SKIP_FLOOR, MAX_SKIP_FRACTION, TASKS

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--glue-dir", required=True, help="folder holding the GLUE task folders")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--dict", required=True, help="the pre-training dict.txt")
    add_tokenizer_args(p)
    p.add_argument(
        "--max-skip-fraction",
        type=float,
        default=MAX_SKIP_FRACTION,
        help="rows with the wrong number of columns, an empty field or a label outside the "
        "task's label set are skipped and counted per reason; more than this share of "
        f"a file's rows (and more than {MAX_SKIP_FLOOR}) is an error (default: %(default)s)",
    )
    args = p.parse_args(argv)
    log = setup_logging("truneg_fairseq.prepare_glue")
    from truneg_fairseq.data.corpus import CorpusError
    from truneg_fairseq.data.glue import prepare_task
    from truneg_fairseq.text import check_record, tokenizer_from_args

    if not os.path.isfile(args.dict):
        fail(f"--dict {args.dict} not found (the dict.txt of the pre-training data-bin)")
    try:
        tok = tokenizer_from_args(args)
        check_record(
            args.dict, tok
        )  # the tokenizer that made the pre-training dict.txt, when recorded
        for name in args.tasks:
            skipped = prepare_task(
                TASKS[name],
                args.glue_dir,
                args.output_dir,
                tok,
                args.dict,
                max_skip_fraction=args.max_skip_fraction,
            )
            log.info(
                f"{name}: written to {os.path.join(args.output_dir, name)} "
                f"(skipped rows: {', '.join(f'{k} {v}' for k, v in skipped.items())})"
            )
    except (CorpusError, OutputDirError) as e:
        fail(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
