"""Prepare GLUE tasks for fine-tuning with fairseq's sentence_prediction task.

Reads the official task folders (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE) under
--glue-dir (those of --tasks, else every one the folder holds, the missing ones logged as
skipped), tokenizes with the pre-training tokenizer and binarizes with the pre-training
dict.txt into OUT/TASK/{input0,input1,label}. MNLI's dev_matched/dev_mismatched become the
valid/valid1 subsets. Malformed rows (wrong column count, empty field, unknown label) are
skipped and counted per reason; too many of them are an error (--max-skip-fraction). An input
(the GLUE folder, the dictionary, the tokenizer's files) is never replaced by an output.

Example:
  truneg-prepare-glue --glue-dir glue_data --output-dir glue-bin \\
      --dict work/data-bin/dict.txt --tokenizer sentencepiece --spm-model work/spm.model
  truneg-prepare-glue --glue-dir glue_data --output-dir glue-bin-bert \\
      --dict imported/bert-base-uncased/dict.txt --tokenizer wordpiece \\
      --vocab imported/bert-base-uncased/vocab.txt
"""

import argparse

from truneg_fairseq.cli.args import command_parser, parse_with_dict
from truneg_fairseq.cli.common import add_dict_flag, fail, interruptible, setup_logging
from truneg_fairseq.text import TokenizerSpec, add_tokenizer_args


def get_parser() -> argparse.ArgumentParser:
    from truneg_fairseq.data.glue_tasks import MAX_SKIP_FLOOR, MAX_SKIP_FRACTION, TASKS

    p = command_parser(__doc__)
    p.add_argument("--glue-dir", required=True, help="folder holding the GLUE task folders")
    p.add_argument("--output-dir", required=True)
    p.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        choices=list(TASKS),
        help="tasks to prepare (each must be under --glue-dir; default: every task whose folder "
        "--glue-dir holds, the others logged as skipped)",
    )
    add_dict_flag(p, help="the pre-training dict.txt")
    add_tokenizer_args(p)
    p.add_argument(
        "--max-skip-fraction",
        type=float,
        default=MAX_SKIP_FRACTION,
        help="rows with the wrong number of columns, an empty field or a label outside the "
        "task's label set are skipped and counted per reason; more than this share of "
        f"a file's rows (and more than {MAX_SKIP_FLOOR}) is an error (default: %(default)s)",
    )
    return p


@interruptible
def main(argv=None) -> int:
    args = parse_with_dict(get_parser(), argv)
    setup_logging("truneg_fairseq.prepare_glue")
    from truneg_fairseq.errors import TrunegError
    from truneg_fairseq.pipelines.glue import PrepareGlueConfig, prepare_glue

    cfg = PrepareGlueConfig(
        glue_dir=args.glue_dir,
        output_dir=args.output_dir,
        dict=args.dict,
        tokenizer=TokenizerSpec.from_args(args),
        tasks=list(args.tasks or []),
        max_skip_fraction=args.max_skip_fraction,
    )
    try:
        prepare_glue(cfg)
    except TrunegError as e:  # its files and rows, the tokenizer, the output directories
        fail(str(e))
    return 0
