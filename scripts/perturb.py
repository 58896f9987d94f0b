#!/usr/bin/env python
"""Write perturbed copies of evaluation files in their original formats (seeded).

  # SQuAD v1.1 dev: WordNet synonym swaps (answers kept, offsets moved) or a distractor sentence
  python scripts/perturb.py squad --method swap_syn_wordnet dev-v1.1.json dev.swap.json
  python scripts/perturb.py squad --method add_sentence_diverse dev-v1.1.json dev.addsent.json
  # a GLUE task folder: synonym swaps in the text columns of dev TSVs (train copied unchanged)
  python scripts/perturb.py glue --task RTE glue_data/RTE glue_swap/RTE

swap_syn_wordnet: probability --prob (0.1) per eligible word, at most --max-swaps (10) per text,
single-word lemmas only. The outputs are read by every recipe unchanged.
"""

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli.common import fail, setup_logging  # noqa: E402


def main(argv=None) -> int:
    from truneg_fairseq.data.glue import TASKS

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="kind", required=True)
    sq = sub.add_parser("squad")
    sq.add_argument("--method", required=True, choices=["swap_syn_wordnet", "add_sentence_diverse"])
    sq.add_argument("input")
    sq.add_argument("output")
    gl = sub.add_parser("glue")
    gl.add_argument("--task", required=True, choices=list(TASKS))
    gl.add_argument("input", help="the task folder (e.g. glue_data/RTE)")
    gl.add_argument("output", help="folder to write")
    for s in (sq, gl):
        s.add_argument("--seed", type=int, default=1)
        s.add_argument("--prob", type=float, default=0.1)
        s.add_argument("--max-swaps", type=int, default=10)
    args = p.parse_args(argv)
    log = setup_logging("truneg_fairseq.data.perturb")
    from truneg_fairseq.data import perturb
    from truneg_fairseq.io_utils import OutputDirError, atomic_open
    from truneg_fairseq.lexicon import WordNetNotFoundError, load_wordnet

    try:
        wn = load_wordnet()
    except WordNetNotFoundError as e:
        fail(str(e))
    if os.path.abspath(args.output) == os.path.abspath(args.input):
        fail(f"--output {args.output} is the input: write the perturbed copy somewhere else")
    if args.kind == "squad":
        from truneg_fairseq.data.corpus import CorpusError
        from truneg_fairseq.data.squad import read_squad_file

        try:  # validated and repaired as the SQuAD task reads it (skips counted and logged)
            data, skipped = read_squad_file(args.input)
        except CorpusError as e:
            fail(str(e))
        if any(skipped.values()):
            log.info(f"{args.input}: {skipped}")
        out, counts = perturb.perturb_squad(
            data, args.method, wn, args.seed, args.prob, args.max_swaps
        )
        with atomic_open(args.output, encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False)
        log.info(
            f"{args.method}: {counts['changed']} of {counts['paragraphs']} contexts changed -> {args.output}"
        )
        return 0
    task = TASKS[args.task]
    if not os.path.isdir(args.input):
        fail(f"{args.input} is not a GLUE task folder")
    try:
        _write_glue(args, task, log, wn)
    except OutputDirError as e:
        fail(str(e))
    return 0


def _write_glue(args, task, log, wn) -> None:
    """The perturbed copy of a GLUE task folder (train copied, the evaluation splits changed)."""
    from truneg_fairseq.data import perturb
    from truneg_fairseq.io_utils import atomic_dir

    with atomic_dir(args.output, f"perturb.py {args.kind}") as tmp:
        for split, fname in task.splits:
            src = os.path.join(args.input, fname)
            if not os.path.isfile(src):
                fail(f"{src} not found")
            if split == "train":
                shutil.copyfile(src, os.path.join(tmp, fname))
                continue
            with open(src, encoding="utf-8", newline="\n") as f:
                lines = [l.rstrip("\r\n") for l in f]
            header = lines[0] if task.header else None
            cols = [
                perturb.column_index(header, k)
                for k in (task.sentence1, task.sentence2)
                if k is not None
            ]
            new, changed = perturb.perturb_glue_tsv(
                lines, cols, wn, args.seed, args.prob, args.max_swaps, task.header
            )
            with open(os.path.join(tmp, fname), "w", encoding="utf-8", newline="\n") as f:
                f.write("\n".join(new) + "\n")
            log.info(f"{args.task} {fname}: {changed} texts changed")


if __name__ == "__main__":
    sys.exit(main())
