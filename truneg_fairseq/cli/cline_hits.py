"""CLINE's "Hits" (Table 7): does a checkpoint place a sentence closer to its synonym version
than to its antonym version?

Triplets (ori, syn, ant) differ in one word: a WordNet synonym in syn, a WordNet antonym in ant
(same part of speech, single words). Give them as a TSV (ori<TAB>syn<TAB>ant) with --triplets,
or make them from any sentence file with --sentences (sentences without a word that has both a
synonym and an antonym are skipped and counted; --save-triplets keeps what was made).

Hits = % of triplets with sim(ori, syn) > sim(ori, ant), per layer (0 = embeddings) and the max
over layers, for three similarities: cosine of the <s> vectors (cls), cosine of mean-pooled
token vectors (mean), BERTScore F1 of greedy token matching (bertscore).

  # work/raw/: the split text truneg-prepare-corpus --keep-intermediates keeps
  truneg-cline-hits checkpoints/cline/checkpoint_last.pt --data work/cline/data-bin \\
      --tokenizer sentencepiece --spm-model work/spm.model --sentences work/raw/valid.txt
  truneg-cline-hits roberta.base/model.pt --data roberta.base --tokenizer gpt2 \\
      --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe --triplets triplets.tsv

Works for fairseq RoBERTa checkpoints, the plugin's cline_roberta_*, bert_hf_* and cline_bert_hf_*
models, and the discriminator of the plugin's ELECTRA (electra_*, cline_electra_*).
--data is a directory holding the checkpoint's dict.txt.
"""

import argparse
import json

from truneg_fairseq.cli.args import command_parser
from truneg_fairseq.cli.checkpoint_command import (
    checkpoint_errors,
    parse_checkpoint_command,
    refuse_checkpoint_outputs,
)
from truneg_fairseq.cli.common import (
    TOKENIZER_FILE_FLAGS,
    add_checkpoint_args,
    fail,
    flag_inputs,
    interruptible,
    write_output,
)
from truneg_fairseq.text import PIECE_KINDS, TokenizerSpec, add_tokenizer_args


def get_parser() -> argparse.ArgumentParser:
    p = command_parser(__doc__)
    add_checkpoint_args(p, several=True, help="fairseq checkpoint files (.pt)")
    p.add_argument("--data", required=True, help="directory with the checkpoint's dict.txt")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--triplets", help="TSV file: ori<TAB>syn<TAB>ant per line")
    src.add_argument("--sentences", help="sentences (one per line) to make triplets from")
    p.add_argument("--save-triplets", help="write the triplets made from --sentences here (TSV)")
    p.add_argument("--max-triplets", type=int, default=0, help="use at most N triplets (0: all)")
    # the kinds CLINE data accepts (data.cline.TOKENIZERS), named without importing torch
    add_tokenizer_args(p, default="sentencepiece", kinds=PIECE_KINDS)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="also write the results as JSON here")
    return p


@interruptible
def main(argv=None) -> int:
    args = parse_checkpoint_command(get_parser(), argv, "truneg_fairseq.cline_hits", several=True)
    from truneg_fairseq.outputs import OutputDirError, files_in

    inputs = [("--data", p) for p in files_in(args.data, ["dict.txt"])]
    inputs += flag_inputs(args, ("--triplets", "--sentences", *TOKENIZER_FILE_FLAGS))
    outputs = {"--save-triplets": args.save_triplets, "--json": args.json}
    refuse_checkpoint_outputs(args, outputs, inputs)
    from truneg_fairseq.evaluation.hits import HITS_METHODS
    from truneg_fairseq.pipelines.cline_run import HitsConfig, cline_hits

    cfg = HitsConfig(
        checkpoints=list(args.checkpoints),
        data=args.data,
        tokenizer=TokenizerSpec.from_args(args),
        triplets=args.triplets,
        sentences=args.sentences,
        save_triplets=args.save_triplets,
        max_triplets=args.max_triplets,
        batch_size=args.batch_size,
        seed=args.seed,
    )
    try:
        with checkpoint_errors(ValueError):
            n, results = cline_hits(cfg)
    except OutputDirError as e:
        fail(f"--save-triplets {e}")
    for ck, res in results.items():
        print(f"\n{ck}: Hits (%) on {n} triplets")
        print(f"{'layer':>6}  " + "  ".join(f"{m:>9}" for m in HITS_METHODS))
        for li in range(len(res["cls"])):
            print(f"{li:>6}  " + "  ".join(f"{res[m][li]:9.2f}" for m in HITS_METHODS))
        print(f"{'max':>6}  " + "  ".join(f"{max(res[m]):9.2f}" for m in HITS_METHODS))
    if args.json:
        doc = {"triplets": n, "results": results}
        write_output("--json", args.json, lambda f: json.dump(doc, f, indent=1), encoding="utf-8")
    return 0
