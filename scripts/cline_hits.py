#!/usr/bin/env python
"""CLINE's "Hits" (Table 7): does a checkpoint place a sentence closer to its synonym version
than to its antonym version?

Triplets (ori, syn, ant) differ in one word: a WordNet synonym in syn, a WordNet antonym in ant
(same part of speech, single words). Give them as a TSV (ori<TAB>syn<TAB>ant) with --triplets,
or make them from any sentence file with --sentences (sentences without a word that has both a
synonym and an antonym are skipped and counted; --save-triplets keeps what was made).

Hits = % of triplets with sim(ori, syn) > sim(ori, ant), per layer (0 = embeddings) and the max
over layers, for three similarities: cosine of the <s> vectors (cls), cosine of mean-pooled
token vectors (mean), BERTScore F1 of greedy token matching (bertscore).

  python scripts/cline_hits.py checkpoints/cline/checkpoint_last.pt --data work/cline/data-bin \\
      --tokenizer sentencepiece --spm-model work/spm.model --sentences work/raw/valid.txt
  python scripts/cline_hits.py roberta.base/model.pt --data roberta.base --tokenizer gpt2 \\
      --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --triplets triplets.tsv

Works for fairseq RoBERTa checkpoints, the plugin's cline_roberta_*, bert_hf_* and cline_bert_hf_*
models, and the discriminator of the plugin's ELECTRA (electra_*, cline_electra_*).
--data is a directory holding the checkpoint's dict.txt.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from truneg_fairseq.cli.common import fail, setup_logging  # noqa: E402
from truneg_fairseq.data.cline import TOKENIZERS  # noqa: E402
from truneg_fairseq.text import TokenizerSpec, add_tokenizer_args  # noqa: E402


def get_parser():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("checkpoints", nargs="+", help="fairseq checkpoint files (.pt)")
    p.add_argument("--data", required=True, help="directory with the checkpoint's dict.txt")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--triplets", help="TSV file: ori<TAB>syn<TAB>ant per line")
    src.add_argument("--sentences", help="sentences (one per line) to make triplets from")
    p.add_argument("--save-triplets", help="write the triplets made from --sentences here (TSV)")
    p.add_argument("--max-triplets", type=int, default=0, help="use at most N triplets (0: all)")
    add_tokenizer_args(p, default="sentencepiece", kinds=TOKENIZERS)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="also write the results as JSON here")
    return p


def read_triplets(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) != 3 or not all(p.strip() for p in parts):
                fail(
                    f"{path}, line {i}: expected 3 tab-separated sentences (ori, syn, ant), got {len(parts)} fields"
                )
            out.append(tuple(parts))
    if not out:
        fail(f"{path}: no triplets")
    return out


def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    log = setup_logging("truneg_fairseq.cline_hits")
    from truneg_fairseq.data import cline
    from truneg_fairseq.evaluation import hits as hits_eval
    from truneg_fairseq.io_utils import atomic_open
    from truneg_fairseq.text import PieceEncoder

    for ck in args.checkpoints:
        if not os.path.isfile(ck):
            fail(f"checkpoint {ck} not found")
    from truneg_fairseq.checkpoints import CheckpointError, data_dir_for

    try:  # before the triplets are built
        data_dir_for(args.checkpoints[0], None, args.data)
    except CheckpointError as e:
        fail(str(e))
    try:
        encoder = PieceEncoder(TokenizerSpec.from_args(args))
    except cline.ClineDataError as e:
        fail(str(e))
    if args.triplets:
        triplets = read_triplets(args.triplets)
    else:
        from truneg_fairseq.lexicon import load_wordnet
        from truneg_fairseq.lexicon.replace import Lexicon

        try:
            lines, _ = cline.read_sentences(args.sentences)
        except cline.ClineDataError as e:
            fail(str(e))
        triplets, skipped = cline.make_hits_triplets(lines, Lexicon(load_wordnet()), seed=args.seed)
        log.info(
            f"{len(triplets)} triplets from {len(lines)} sentences ({skipped} skipped: no word with both a synonym and an antonym)"
        )
        if not triplets:
            fail(
                f"--sentences {args.sentences}: no sentence has a word with both a WordNet synonym and antonym"
            )
        if args.save_triplets:
            with atomic_open(args.save_triplets, "w", encoding="utf-8") as f:
                f.writelines("\t".join(t) + "\n" for t in triplets)
    if args.max_triplets:
        triplets = triplets[: args.max_triplets]

    import truneg_fairseq  # noqa: F401  (registration)
    from truneg_fairseq.checkpoints import load_for_inference

    results = {}
    for ck in args.checkpoints:
        try:
            models, _, task = load_for_inference(ck, args.data)
        except CheckpointError as e:
            fail(str(e))
        model = models[0]
        try:
            res = hits_eval.hits(
                model,
                task.source_dictionary,
                encoder,
                triplets,
                args.batch_size,
                max_positions=model.max_positions() or 512,
            )
        except ValueError as e:
            fail(f"{ck}: {e}")
        results[ck] = res
        print(f"\n{ck}: Hits (%) on {len(triplets)} triplets")
        print(f"{'layer':>6}  " + "  ".join(f"{m:>9}" for m in hits_eval.HITS_METHODS))
        for li in range(len(res["cls"])):
            print(f"{li:>6}  " + "  ".join(f"{res[m][li]:9.2f}" for m in hits_eval.HITS_METHODS))
        print(f"{'max':>6}  " + "  ".join(f"{max(res[m]):9.2f}" for m in hits_eval.HITS_METHODS))
    if args.json:
        with atomic_open(args.json, "w", encoding="utf-8") as f:
            json.dump({"triplets": len(triplets), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
